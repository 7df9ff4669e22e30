# The `kiln inspect MODEL.onnx` tests (tests/unit/onnx/onnx_inspect_cli_test.cc)
# run the built kiln binary, so building the onnx tests builds it too.
if(TARGET test_onnx AND TARGET kiln_cli)
  add_dependencies(test_onnx kiln_cli)
endif()

# The layout stage where AVX-512 is turned off (KILN_ISA=avx2): kiln's own
# row-major kernels are the fast path there, so nothing is blocked and the
# outputs still match (the compile test checks both sides of BestIsa).
if(TARGET test_compiler)
  add_test(NAME layout_stage_avx2
           COMMAND test_compiler --gtest_filter=TensorLayoutsCompile.*
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(layout_stage_avx2 PROPERTIES LABELS compiler
                       ENVIRONMENT "KILN_ISA=avx2;OMP_WAIT_POLICY=PASSIVE")
endif()
