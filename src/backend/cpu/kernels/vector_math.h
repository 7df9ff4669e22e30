// The kernels' vector exp, tanh and erf applied to arrays: for tests of
// their accuracy and for callers that need them directly.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/isa.h"

namespace kiln::cpu {

// y[i] = e^x[i], tanh(x[i]) or erf(x[i]) for i < n with the `isa` kernels'
// approximation (the scalar ISA uses libm). y may equal x.
// REQUIRES: IsaAvailable(isa).
void VectorExp(Isa isa, const float* x, float* y, int64_t n);
void VectorTanh(Isa isa, const float* x, float* y, int64_t n);
void VectorErf(Isa isa, const float* x, float* y, int64_t n);

}  // namespace kiln::cpu
