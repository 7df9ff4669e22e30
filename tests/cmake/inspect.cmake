# The `kiln inspect` end-to-end tests (tests/unit/format/inspect_cli_test.cc)
# run the built kiln binary, so building the format tests builds it too.
if(TARGET test_format AND TARGET kiln_cli)
  add_dependencies(test_format kiln_cli)
endif()
