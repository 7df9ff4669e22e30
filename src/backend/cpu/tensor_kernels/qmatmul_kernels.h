// The quantized families' kernel registrations, gathered by quant_kernels.cc.
#pragma once

#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// MatMulInteger, QLinearMatMul, kiln.QLinearMatMul.
void AddQuantMatMulKernels(std::vector<TensorKernelEntry>* kernels);
// ConvInteger, QLinearConv.
void AddQuantConvKernels(std::vector<TensorKernelEntry>* kernels);

}  // namespace kiln::cpu
