# Accuracy checks beyond GoogleTest, through the kiln binary:
#   accuracy_gguf_perplexity_K every GGUF file of ../shared/models/gguf (23)
#                              against llama.cpp's perplexity goldens and the
#                              dequantized reference's, in four shards of a
#                              thread each that CTest runs side by side
#                              (about 100 s of one core in all;
#                              gguf_perplexity_check.py --files quick runs
#                              four, one per kernel family);
#   accuracy_diff_cli, accuracy_eval_cli, accuracy_kv_int8_cli,
#   accuracy_w8a8_cli          kiln diff and kiln eval end to end (the last
#                              two about a minute each);
#   accuracy_plan_cli          kiln inspect --plan names the packing of
#                              Q4_0/Q8_0 weights and of --w8a8.
if(TARGET test_accuracy)
  add_dependencies(test_accuracy kiln_cli)
endif()
if(TARGET test_quantize)
  add_dependencies(test_quantize kiln_cli)
endif()

set(kiln_shared ${PROJECT_SOURCE_DIR}/../shared)
set(accuracy_dir ${PROJECT_SOURCE_DIR}/tests/unit/accuracy)

foreach(shard 1 2 3 4)
  add_test(NAME accuracy_gguf_perplexity_${shard}
    COMMAND /usr/bin/python3 ${accuracy_dir}/gguf_perplexity_check.py $<TARGET_FILE:kiln_cli> ${kiln_shared}
            --files all --shard ${shard}/4 --threads 1
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(accuracy_gguf_perplexity_${shard} PROPERTIES LABELS "accuracy;python" TIMEOUT 1500)
endforeach()

foreach(check diff eval kv-int8 plan w8a8)
  string(REPLACE "-" "_" name ${check})
  add_test(NAME accuracy_${name}_cli
    COMMAND /usr/bin/python3 ${accuracy_dir}/accuracy_cli_check.py $<TARGET_FILE:kiln_cli> ${kiln_shared}
            ${PROJECT_BINARY_DIR}/accuracy_tmp ${check}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(accuracy_${name}_cli PROPERTIES LABELS "accuracy;python" TIMEOUT 600)
endforeach()
