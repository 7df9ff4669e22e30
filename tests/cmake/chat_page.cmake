# The chat page of `kiln serve` in a real browser: Debian's chromium, driven
# headless by playwright-core (node's test runner), against a `kiln serve`
# the test starts on loopback with --api-key. playwright-core is installed
# from tests/chat_page's lockfile into the build tree by the chat_page_npm_ci
# fixture; it never downloads a browser. The test leaves its screenshot in
# <build>/tests/chat_page/chat.png.
set(KILN_CHAT_PAGE_TEST_DIR ${PROJECT_SOURCE_DIR}/tests/chat_page)
find_program(KILN_CHROMIUM NAMES chromium PATHS /usr/bin NO_DEFAULT_PATH)
find_program(KILN_NODE node)
find_program(KILN_NPM npm)
if(KILN_NODE AND KILN_NPM AND KILN_CHROMIUM)
  set(chat_page_npm_dir ${PROJECT_BINARY_DIR}/chat-page-npm)
  add_test(NAME chat_page_npm_ci
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${KILN_CHAT_PAGE_TEST_DIR} -DDEST=${chat_page_npm_dir} -DNPM=${KILN_NPM}
            -P ${PROJECT_SOURCE_DIR}/tests/server/npm_ci.cmake)
  set_tests_properties(chat_page_npm_ci PROPERTIES FIXTURES_SETUP chat_page_npm LABELS "server;node" TIMEOUT 600)
  add_test(NAME chat_page_browser
    COMMAND ${KILN_NODE} --test ${KILN_CHAT_PAGE_TEST_DIR}/chat_page.test.js
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(chat_page_browser PROPERTIES FIXTURES_REQUIRED chat_page_npm LABELS "server;node;browser"
    TIMEOUT 300 ENVIRONMENT
    "KILN_BIN=$<TARGET_FILE:kiln_cli>;OMP_WAIT_POLICY=PASSIVE;NODE_PATH=${chat_page_npm_dir}/node_modules;KILN_CHROMIUM=${KILN_CHROMIUM};KILN_CHAT_PAGE_ARTIFACTS=${PROJECT_BINARY_DIR}/tests/chat_page")
else()
  message(STATUS "node, npm or chromium not found: the chat page's browser test is left out (scripts/setup.sh installs them)")
endif()
