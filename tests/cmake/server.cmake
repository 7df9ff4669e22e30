# `kiln serve` tests beyond GoogleTest (tests/unit/server/ runs the server in
# process): the raw HTTP, load, disconnect, `kiln router` over two replicas,
# and structured-output (outputs
# validated against Debian's json-schema-test-suite) tests (pytest, tests/server/)
# and the official OpenAI npm client (node's test runner) against a
# `kiln serve` each test starts on loopback. The npm packages are installed
# from the lockfile by the server_npm_ci fixture, into the build tree.
set(KILN_SERVER_TEST_DIR ${PROJECT_SOURCE_DIR}/tests/server)
set(KILN_SERVER_TEST_ENV "KILN_BIN=$<TARGET_FILE:kiln_cli>;OMP_WAIT_POLICY=PASSIVE")

foreach(name raw_http load disconnect tools router)
  add_test(NAME server_${name}
    COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${KILN_SERVER_TEST_DIR}/test_${name}.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(server_${name} PROPERTIES LABELS "server;python" TIMEOUT 600
    ENVIRONMENT "${KILN_SERVER_TEST_ENV}")
endforeach()
# Prefill and decode instances joined by the UCX KV connector, behind the
# router: built only where UCX is.
if(UCX_FOUND)
  add_test(NAME server_disaggregation
    COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${KILN_SERVER_TEST_DIR}/test_disaggregation.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(server_disaggregation PROPERTIES LABELS "server;python" TIMEOUT 300
    ENVIRONMENT "${KILN_SERVER_TEST_ENV}")
endif()
# Prints its per-keyword table (schemas enforced or refused, outputs valid
# or cut by max_tokens) into the test log.
add_test(NAME server_structured_output
  COMMAND /usr/bin/python3 -m pytest -q -s -p no:cacheprovider ${KILN_SERVER_TEST_DIR}/test_structured_output.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(server_structured_output PROPERTIES LABELS "server;python" TIMEOUT 300
  ENVIRONMENT "${KILN_SERVER_TEST_ENV}")

find_program(KILN_NODE node)
find_program(KILN_NPM npm)
if(KILN_NODE AND KILN_NPM)
  set(npm_dir ${PROJECT_BINARY_DIR}/server-npm)
  add_test(NAME server_npm_ci
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${KILN_SERVER_TEST_DIR} -DDEST=${npm_dir} -DNPM=${KILN_NPM}
            -P ${KILN_SERVER_TEST_DIR}/npm_ci.cmake)
  set_tests_properties(server_npm_ci PROPERTIES FIXTURES_SETUP server_npm LABELS "server;node" TIMEOUT 600)
  add_test(NAME server_openai_client
    COMMAND ${KILN_NODE} --test ${KILN_SERVER_TEST_DIR}/openai_client.test.js
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(server_openai_client PROPERTIES FIXTURES_REQUIRED server_npm LABELS "server;node"
    TIMEOUT 600 ENVIRONMENT "${KILN_SERVER_TEST_ENV};NODE_PATH=${npm_dir}/node_modules")
else()
  message(STATUS "node or npm not found: the OpenAI client tests are left out (scripts/setup.sh installs them)")
endif()
