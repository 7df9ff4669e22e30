// The CPU's tensor kernels of the shape family.
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

void AddShapeKernels(std::vector<TensorKernelEntry>* kernels) { (void)kernels; }

}  // namespace kiln::cpu
