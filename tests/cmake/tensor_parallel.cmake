# Tensor parallelism end to end (tests/parallel/tensor_parallel_check.py):
# `mpirun -np 2 kiln ... --tensor-parallel-size 2` on the shared tiny
# models against single-process kiln, a rank killed mid-generation, and the
# bad inputs. Only where the kiln command is built with MPI and mpirun is
# found; as root (CI), mpirun needs --allow-run-as-root.
if(TARGET kiln_parallel AND MPIEXEC_EXECUTABLE)
  function(kiln_tensor_parallel_test name)
    add_test(NAME tensor_parallel_${name}
      COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/parallel/tensor_parallel_check.py
              ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:kiln_cli> ${ARGN}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    # Two ranks of one thread each.
    set_tests_properties(tensor_parallel_${name} PROPERTIES LABELS "parallel;python;mpi" TIMEOUT 300 PROCESSORS 2)
  endfunction()
  kiln_tensor_parallel_test(generate_tiny_qwen2_f32 generate tiny-qwen2)
  kiln_tensor_parallel_test(generate_tiny_llama_bf16 generate tiny-llama --precision fp32)
  kiln_tensor_parallel_test(generate_tiny_qwen2_q8_0 generate gguf/tiny-qwen2-Q8_0.gguf)
  kiln_tensor_parallel_test(generate_tiny_qwen3_q4_0 generate gguf/tiny-qwen3-Q4_0.gguf)
  kiln_tensor_parallel_test(serve_tiny_qwen2 serve tiny-qwen2)
  kiln_tensor_parallel_test(reference_tiny_llama reference tiny-llama)
  kiln_tensor_parallel_test(reference_tiny_qwen2 reference tiny-qwen2)
  kiln_tensor_parallel_test(reference_tiny_qwen3 reference tiny-qwen3)
  kiln_tensor_parallel_test(bench_sweep bench-sweep)
  kiln_tensor_parallel_test(rank_killed rank-killed)
  kiln_tensor_parallel_test(bad_input bad-input)
endif()
