// The CPU's tensor kernels of the conv family.
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

void AddConvKernels(std::vector<TensorKernelEntry>* kernels) { (void)kernels; }

}  // namespace kiln::cpu
