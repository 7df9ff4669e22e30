# Installs a test folder's npm packages (the OpenAI client tests', the chat
# page test's) into DEST from the committed lockfile (npm ci, with its cache
# in DEST), unless DEST already holds exactly that lockfile's install. Run by
# the server_npm_ci and chat_page_npm_ci tests:
#   cmake -DSOURCE=<tests/server> -DDEST=<dir> -DNPM=<npm> -P npm_ci.cmake
file(MAKE_DIRECTORY ${DEST})
set(stamp ${DEST}/node_modules/.kiln-installed-lock)
file(READ ${SOURCE}/package-lock.json lock)
if(EXISTS ${stamp})
  file(READ ${stamp} installed)
  if(installed STREQUAL lock)
    message(STATUS "npm packages are up to date in ${DEST}")
    return()
  endif()
endif()
configure_file(${SOURCE}/package.json ${DEST}/package.json COPYONLY)
configure_file(${SOURCE}/package-lock.json ${DEST}/package-lock.json COPYONLY)
execute_process(COMMAND ${NPM} ci --no-audit --no-fund --cache ${DEST}/npm-cache
                WORKING_DIRECTORY ${DEST} RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "npm ci failed (${result}) in ${DEST}")
endif()
file(WRITE ${stamp} "${lock}")
