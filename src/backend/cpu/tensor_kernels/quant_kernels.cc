// The CPU's tensor kernels of the quant family.
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

void AddQuantKernels(std::vector<TensorKernelEntry>* kernels) { (void)kernels; }

}  // namespace kiln::cpu
