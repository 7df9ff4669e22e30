# Pipeline parallelism end to end (tests/parallel/pipeline_parallel_check.py):
# `mpirun -np 2 kiln ... --pipeline-parallel-size 2` on the shared tiny
# models against single-process kiln, bit for bit; a rank killed
# mid-generation; the bad inputs. Only where the kiln command is built with
# MPI and mpirun is found.
if(TARGET kiln_parallel AND MPIEXEC_EXECUTABLE)
  function(kiln_pipeline_parallel_test name)
    add_test(NAME pipeline_parallel_${name}
      COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/parallel/pipeline_parallel_check.py
              ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:kiln_cli> ${ARGN}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    # Two ranks of one thread each.
    set_tests_properties(pipeline_parallel_${name} PROPERTIES LABELS "parallel;python;mpi" TIMEOUT 300 PROCESSORS 2)
  endfunction()
  kiln_pipeline_parallel_test(generate_tiny_qwen2_f32 generate tiny-qwen2)
  kiln_pipeline_parallel_test(generate_tiny_llama_bf16 generate tiny-llama)
  kiln_pipeline_parallel_test(generate_tiny_qwen2_q8_0 generate gguf/tiny-qwen2-Q8_0.gguf)
  kiln_pipeline_parallel_test(generate_both_tiny_qwen2 generate-both tiny-qwen2)
  kiln_pipeline_parallel_test(serve_tiny_qwen2 serve tiny-qwen2)
  kiln_pipeline_parallel_test(reference_tiny_llama reference tiny-llama)
  kiln_pipeline_parallel_test(reference_tiny_qwen2 reference tiny-qwen2)
  kiln_pipeline_parallel_test(reference_tiny_qwen3 reference tiny-qwen3)
  kiln_pipeline_parallel_test(rank_killed rank-killed)
  kiln_pipeline_parallel_test(bad_input bad-input)
endif()
