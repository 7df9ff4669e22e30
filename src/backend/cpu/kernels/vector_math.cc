// Array entry points of the vector math functions.
#include "backend/cpu/kernels/vector_math.h"

#include "backend/cpu/kernels/kernel_table.h"

namespace kiln::cpu {

void VectorExp(Isa isa, const float* x, float* y, int64_t n) {
  KernelsFor(isa).exp(MathArgs{x, y, n});
}
void VectorTanh(Isa isa, const float* x, float* y, int64_t n) {
  KernelsFor(isa).tanh(MathArgs{x, y, n});
}
void VectorErf(Isa isa, const float* x, float* y, int64_t n) {
  KernelsFor(isa).erf(MathArgs{x, y, n});
}

}  // namespace kiln::cpu
