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
  set_tests_properties(onnx_oracle_tools PROPERTIES LABELS "onnx;python;node" TIMEOUT 120
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
else()
  message(STATUS "node not found: the onnxruntime reference tests are left out (scripts/setup.sh installs it)")
endif()
