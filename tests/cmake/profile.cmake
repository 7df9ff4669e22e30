# The profiler's trace from the CLI, checked in Python: every kernel of each
# step present, events nested, the parts of each step adding up to it.
add_test(NAME profile_trace_cli
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/unit/bench/trace_check.py
          $<TARGET_FILE:kiln_cli> ${PROJECT_SOURCE_DIR}/../shared ${PROJECT_BINARY_DIR}/profile_trace_check
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(profile_trace_cli PROPERTIES LABELS "bench;python" TIMEOUT 300
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
