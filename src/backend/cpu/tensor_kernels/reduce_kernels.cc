// The CPU's tensor kernels of the reduce family.
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

void AddReduceKernels(std::vector<TensorKernelEntry>* kernels) { (void)kernels; }

}  // namespace kiln::cpu
