# C API tests beyond GoogleTest: a C99 program against libkiln.so, the
# shared library's exported symbols, `cmake --install` with the examples
# built against the installed package, and the Python binding's pytest
# suite. test_capi compares with `kiln generate`, so it needs the CLI.
if(TARGET test_capi)
  add_dependencies(test_capi kiln_cli)
endif()

set(KILN_CAPI_TEST_DIR ${PROJECT_SOURCE_DIR}/tests/unit/capi)
set(KILN_CAPI_SHARED_DIR ${PROJECT_SOURCE_DIR}/../shared)

add_executable(capi_c_test ${KILN_CAPI_TEST_DIR}/c_api_test.c)
set_target_properties(capi_c_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(capi_c_test PRIVATE -Wall -Wextra -Wpedantic -Werror)
target_link_libraries(capi_c_test PRIVATE kiln)
# The ONNX models the C program runs, written at build time.
set(capi_onnx_dir ${PROJECT_BINARY_DIR}/capi_c_onnx_models)
add_custom_command(OUTPUT ${capi_onnx_dir}/two_relu.onnx
  COMMAND /usr/bin/python3 ${KILN_CAPI_TEST_DIR}/make_capi_onnx_models.py ${capi_onnx_dir}
  DEPENDS ${KILN_CAPI_TEST_DIR}/make_capi_onnx_models.py
  COMMENT "Writing the C API test's ONNX models" VERBATIM)
add_custom_target(capi_c_onnx_models DEPENDS ${capi_onnx_dir}/two_relu.onnx)
add_dependencies(capi_c_test capi_c_onnx_models)
add_test(NAME capi_c_program COMMAND capi_c_test ${KILN_CAPI_SHARED_DIR}/models/tiny-qwen2 ${capi_onnx_dir})
set_tests_properties(capi_c_program PROPERTIES LABELS "capi" ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

add_test(NAME capi_exported_symbols
  COMMAND /usr/bin/python3 ${KILN_CAPI_TEST_DIR}/check_exports.py $<TARGET_FILE:kiln>
          ${PROJECT_SOURCE_DIR}/include/kiln/kiln.h)
set_tests_properties(capi_exported_symbols PROPERTIES LABELS "capi")

# A sanitized libkiln.so needs its runtime loaded first, which neither
# Python nor the separately built examples do: these two run unsanitized only.
if(KILN_SANITIZE)
  return()
endif()

add_test(NAME capi_install_and_examples
  COMMAND bash ${KILN_CAPI_TEST_DIR}/install_examples_test.sh ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR} ${KILN_CAPI_SHARED_DIR}/models/tiny-qwen2)
set_tests_properties(capi_install_and_examples PROPERTIES LABELS "capi" TIMEOUT 600
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

add_test(NAME capi_python
  COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/python/tests
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(capi_python PROPERTIES LABELS "capi;python" TIMEOUT 900
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;KILN_LIBRARY=$<TARGET_FILE:kiln>;KILN_CLI=$<TARGET_FILE:kiln_cli>;KILN_SHARED_DIR=${KILN_CAPI_SHARED_DIR};KILN_BACKEND_PLUGIN_DIR=${PROJECT_BINARY_DIR}/plugins")
