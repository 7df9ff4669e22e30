# Engine tests beyond the GoogleTest cases: test_engine runs `kiln generate`
# (so it needs the CLI built first), and the --dump files are checked with
# numpy.
if(TARGET test_engine)
  add_dependencies(test_engine kiln_cli)
endif()

add_test(NAME engine_dump_numpy
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/unit/engine/dump_numpy_check.py
          $<TARGET_FILE:kiln_cli> ${PROJECT_SOURCE_DIR}/../shared ${PROJECT_BINARY_DIR}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(engine_dump_numpy PROPERTIES LABELS "engine;python" TIMEOUT 300
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
