// The quantized families' kernel registrations, gathered by quant_kernels.cc.
#pragma once

#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// MatMulInteger, QLinearMatMul, kiln.QLinearMatMul.
void AddQuantMatMulKernels(std::vector<TensorKernelEntry>* kernels);
// Their plain int32 loops whatever the operands (tests compare with them).
Expected<TensorKernel> MakeQMatMulReference(const TensorKernelArgs& args);
// ConvInteger, QLinearConv.
void AddQuantConvKernels(std::vector<TensorKernelEntry>* kernels);

}  // namespace kiln::cpu
