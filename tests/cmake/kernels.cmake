# The CPU kernel tests again with the instruction set forced down by
# KILN_ISA, so that dispatch to the lower kernel tables is tested on any CPU
# (the vector tests of a forced-out ISA skip; the scalar ones still run).
if(TARGET test_kernels)
  foreach(isa scalar avx2 avx-vnni)
    add_test(NAME kernels_with_KILN_ISA_${isa}
             COMMAND test_kernels --gtest_filter=Isa.*:Isas/LinearTest.*:Isas/AttentionTest.*:ThreadPool.Default*)
    set_tests_properties(kernels_with_KILN_ISA_${isa} PROPERTIES
                         ENVIRONMENT "KILN_ISA=${isa};OMP_WAIT_POLICY=PASSIVE"
                         LABELS "unit;kernels")
  endforeach()
endif()

# The quantized kernels on plain AVX2 and on AVX-VNNI (where the CPU has it;
# otherwise the same tables as avx2), against the reference.
if(TARGET test_kernels)
  foreach(isa avx2 avx-vnni)
    add_test(NAME quant_kernels_with_KILN_ISA_${isa} COMMAND test_kernels --gtest_filter=*QuantX8*:*QuantLinear*)
    set_tests_properties(quant_kernels_with_KILN_ISA_${isa} PROPERTIES
                         ENVIRONMENT "KILN_ISA=${isa};OMP_WAIT_POLICY=PASSIVE"
                         LABELS "unit;kernels")
  endforeach()
endif()

# The quantized kernels with AMX turned off, so that on an AMX machine the
# vector kernels' many-rows path is still checked against the reference.
if(TARGET test_kernels AND TARGET test_quant)
  add_test(NAME kernels_with_KILN_AMX_0 COMMAND test_kernels --gtest_filter=*QuantX8*:*QuantLinear*)
  add_test(NAME quant_with_KILN_AMX_0 COMMAND test_quant --gtest_filter=*QuantLinear*:*W8A8*)
  set_tests_properties(kernels_with_KILN_AMX_0 quant_with_KILN_AMX_0 PROPERTIES
                       ENVIRONMENT "KILN_AMX=0;OMP_WAIT_POLICY=PASSIVE" LABELS "unit;kernels")
endif()
