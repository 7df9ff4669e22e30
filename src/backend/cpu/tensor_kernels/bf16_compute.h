// The bf16 products of the tensor ops. The compiler's precision policy
// (compiler/tensor_precision.h) gives a Conv, MatMul or Gemm the attribute
// compute_dtype = "bf16" where this CPU multiplies bf16 natively; the
// kernel then stores its weights in bf16 once, rounds its activations to
// bf16 (to nearest even) as it reads them, accumulates in fp32 and writes
// fp32. Where a kernel cannot take a shape in bf16 it runs its fp32 path
// (its impl says which).
#pragma once

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Whether the node asks for bf16 products: compute_dtype "bf16" (true),
// "f32" or absent (false); another value is an error naming the node.
Expected<bool> WantsBf16Compute(const TensorKernelArgs& args);

// Whether the bf16 products run on oneDNN's bf16 kernels: where this CPU
// multiplies bf16 natively, AVX-512 BF16 (vdpbf16ps) or AMX BF16, as
// GetCpuInfo reports them (KILN_ISA=avx2|scalar turns them off); or, with
// KILN_BF16_PRODUCTS=emulated, on any AVX-512 CPU, where oneDNN emulates
// them (the same bf16 results, slower than fp32: for testing the bf16 path
// on a CPU without it).
bool CpuMultipliesBf16();

}  // namespace kiln::cpu
