# The second reference of the Gemma model tests: llama.cpp through the npm
# package node-llama-cpp (its CPU build), which scripts/setup.sh installs into
# tests/llamacpp_oracle/node_modules, on the GGUF files of the small reference
# models, against the PyTorch implementation kiln's test_models checks
# kiln against (tests/tools/gemma_llama_cpp_check.py).
find_program(KILN_NODE_FOR_LLAMA_CPP node)
if(KILN_NODE_FOR_LLAMA_CPP)
  add_test(NAME gemma_llama_cpp_reference
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/tools/gemma_llama_cpp_check.py
            ${PROJECT_BINARY_DIR}/gemma-llama-cpp)
  set_tests_properties(gemma_llama_cpp_reference PROPERTIES LABELS "models;python;node" TIMEOUT 600
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
  # bench/'s llama.cpp side-by-side tools: the quantizer wrapper and the speed script.
  add_test(NAME llama_cpp_bench_tools
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/tools/llama_cpp_bench_tools_check.py
            ${PROJECT_BINARY_DIR}/llama-cpp-bench-tools $<TARGET_FILE:kiln_cli>
            ${PROJECT_SOURCE_DIR}/../shared)
  set_tests_properties(llama_cpp_bench_tools PROPERTIES LABELS "bench;python;node" TIMEOUT 300)
else()
  message(STATUS "node not found: the llama.cpp reference of the Gemma tests is left out (scripts/setup.sh installs it)")
endif()
