# The independent reference for ONNX runs (tests/onnx_oracle): onnxruntime's
# CPU provider through onnxruntime-node, which scripts/setup.sh installs into
# tests/onnx_oracle/node_modules from the pinned lockfile. This test checks
# the reference tooling itself (.npy I/O, ort_run.js, compare_npy.py, the QDQ
# quantizer) against numpy, in seconds.
find_program(KILN_NODE node)
if(KILN_NODE)
  add_test(NAME onnx_oracle_tools
    COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/test_oracle_tools.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_oracle_tools PROPERTIES LABELS "onnx;python;node" TIMEOUT 300
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
else()
  message(STATUS "node not found: the onnxruntime reference tests are left out (scripts/setup.sh installs it)")
endif()

# Every vision test model (tests/onnx_oracle/make_vision_models.py, generated
# once into the build tree) through `kiln run` and onnxruntime, compared
# output by output. On when the CLI has `kiln run`.
option(KILN_ONNX_MODEL_COMPARISONS "compare kiln run with onnxruntime on the vision test models" OFF)
if(KILN_NODE AND KILN_ONNX_MODEL_COMPARISONS AND TARGET kiln_cli)
  add_test(NAME onnx_model_comparisons
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/run_model_comparisons.sh
            $<TARGET_FILE:kiln_cli> ${PROJECT_BINARY_DIR}/onnx-models)
  set_tests_properties(onnx_model_comparisons PROPERTIES LABELS "onnx;node;models" TIMEOUT 900 PROCESSORS 2
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
endif()
