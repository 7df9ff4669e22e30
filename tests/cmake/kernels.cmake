# The CPU kernel tests again with the instruction set forced down by
# KILN_ISA, so that dispatch to the lower kernel tables is tested on any CPU
# (the vector tests of a forced-out ISA skip; the scalar ones still run).
# The avx-vnni runs need a CPU with AVX-VNNI; elsewhere that level is the
# avx2 one, already run, so they skip (exit 77). The avx512 runs (AVX-512
# without VNNI, BF16 or AMX: the 512-bit table's plain kernels) need
# AVX-512; on a CPU without it they skip.
set(only_with_cpu_flag ${PROJECT_SOURCE_DIR}/tests/tools/only_with_cpu_flag.sh)
function(kiln_isa_prefix isa out)
  set(prefix)
  if(isa STREQUAL "avx-vnni")
    set(prefix ${only_with_cpu_flag} avx_vnni)
  elseif(isa STREQUAL "avx512")
    set(prefix ${only_with_cpu_flag} avx512bw)
  endif()
  set(${out} ${prefix} PARENT_SCOPE)
endfunction()
if(TARGET test_kernels)
  foreach(isa scalar avx2 avx-vnni avx512)
    kiln_isa_prefix(${isa} prefix)
    add_test(NAME kernels_with_KILN_ISA_${isa}
             COMMAND ${prefix} $<TARGET_FILE:test_kernels>
                     --gtest_filter=Isa.*:Isas/LinearTest.*:Isas/AttentionTest.*:ThreadPool.Default*)
    # The quantized kernels on scalar, plain AVX2, AVX-VNNI and plain
    # AVX-512, against the reference (under scalar the vector checks skip; the x8 copies are
    # still made and the reference's results checked across row counts).
    add_test(NAME quant_kernels_with_KILN_ISA_${isa}
             COMMAND ${prefix} $<TARGET_FILE:test_kernels> --gtest_filter=*QuantX8*:*QuantLinear*)
    set_tests_properties(quant_kernels_with_KILN_ISA_${isa} PROPERTIES
                         ENVIRONMENT "KILN_ISA=${isa};OMP_WAIT_POLICY=PASSIVE"
                         LABELS "unit;kernels" SKIP_RETURN_CODE 77)
    set_tests_properties(kernels_with_KILN_ISA_${isa} PROPERTIES
                         ENVIRONMENT "KILN_ISA=${isa};OMP_WAIT_POLICY=PASSIVE"
                         LABELS "unit;kernels" SKIP_RETURN_CODE 77)
  endforeach()
endif()

# The quantized linear layer and block dot products (every format, the grid
# i-quants included, which only these cover) with the level forced down.
if(TARGET test_quant)
  foreach(isa scalar avx2 avx-vnni avx512)
    kiln_isa_prefix(${isa} prefix)
    add_test(NAME quant_linear_with_KILN_ISA_${isa}
             COMMAND ${prefix} $<TARGET_FILE:test_quant> --gtest_filter=*QuantLinear*:*BlockDot*)
    set_tests_properties(quant_linear_with_KILN_ISA_${isa} PROPERTIES
                         ENVIRONMENT "KILN_ISA=${isa};OMP_WAIT_POLICY=PASSIVE"
                         LABELS "unit;kernels" SKIP_RETURN_CODE 77)
  endforeach()
endif()

# The quantized kernels with AMX turned off, so that on an AMX machine the
# vector kernels' many-rows path is still checked against the reference.
# Elsewhere the default run already is that check: they skip (exit 77).
if(TARGET test_kernels AND TARGET test_quant)
  set(only_with_amx ${only_with_cpu_flag} amx_tile)
  add_test(NAME kernels_with_KILN_AMX_0
           COMMAND ${only_with_amx} $<TARGET_FILE:test_kernels> --gtest_filter=*QuantX8*:*QuantLinear*)
  add_test(NAME quant_with_KILN_AMX_0
           COMMAND ${only_with_amx} $<TARGET_FILE:test_quant> --gtest_filter=*QuantLinear*:*W8A8*)
  set_tests_properties(kernels_with_KILN_AMX_0 quant_with_KILN_AMX_0 PROPERTIES
                       ENVIRONMENT "KILN_AMX=0;OMP_WAIT_POLICY=PASSIVE" LABELS "unit;kernels" SKIP_RETURN_CODE 77)
endif()
