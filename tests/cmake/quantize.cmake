# The `kiln quantize` end-to-end tests (tests/unit/quant/quantize_cli_test.cc)
# run the built kiln binary, so building the quant tests builds it too.
if(TARGET test_quant AND TARGET kiln_cli)
  add_dependencies(test_quant kiln_cli)
endif()
