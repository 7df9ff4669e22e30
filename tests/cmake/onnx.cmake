# The `kiln inspect MODEL.onnx` tests (tests/unit/onnx/onnx_inspect_cli_test.cc)
# run the built kiln binary, so building the onnx tests builds it too.
if(TARGET test_onnx AND TARGET kiln_cli)
  add_dependencies(test_onnx kiln_cli)
endif()
