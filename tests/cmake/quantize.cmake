# The `kiln quantize` end-to-end tests (tests/unit/quantize/quantize_cli_test.cc)
# run the built kiln binary, so building the quantize tests builds it too.
if(TARGET test_quantize AND TARGET kiln_cli)
  add_dependencies(test_quantize kiln_cli)
endif()
