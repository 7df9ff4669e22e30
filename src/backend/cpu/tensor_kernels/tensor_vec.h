// Vector kernels of the f32 fast paths of the elementwise and reduce tensor
// ops (binary arithmetic, activations, row softmax, layer normalization),
// one table per instruction set chosen at run time as the LLM kernels are
// (kernels/kernel_table.h, honouring KILN_ISA). The scalar table is the
// plain reference the vector ones are tested against. Each entry works on
// the calling thread; the tensor kernels split work over the pool.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/isa.h"

namespace kiln::cpu {

enum class VecBinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };

enum class VecUnaryOp : uint8_t {
  kRelu,
  kLeakyRelu,    // x < 0 ? alpha x : x
  kHardSigmoid,  // clamp(alpha x + beta, 0, 1)
  kHardSwish,    // x clamp(x / 6 + 1/2, 0, 1)
  kSigmoid,
  kSilu,  // x sigmoid(x)
  kTanh,
  kExp,
  kErf,
  kGelu,      // x/2 (1 + erf(x / sqrt 2))
  kGeluTanh,  // the tanh approximation
};

struct TensorVecTable {
  Isa isa;
  // out[i] = a[i * a_step] op b[i * b_step] for i < n; a step is 0 (a
  // scalar operand) or 1.
  void (*binary)(VecBinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step, float* out,
                 int64_t n);
  // y[i] = f(x[i]) for i < n (y may equal x).
  void (*unary)(VecUnaryOp op, float alpha, float beta, const float* x, float* y, int64_t n);
  // Each of `rows` contiguous rows of `cols`: softmax, or log-softmax.
  void (*softmax_rows)(const float* x, float* y, int64_t rows, int64_t cols, bool log);
  // Each row normalized to mean 0, variance 1 (two passes), then times
  // scale[c] plus bias[c] (bias may be null). mean / inv_std (may be null)
  // receive each row's statistics.
  void (*layer_norm_rows)(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                          int64_t cols, float epsilon, float* mean, float* inv_std);
};

// The table for `isa`; REQUIRES IsaAvailable(isa) to run its kernels.
const TensorVecTable& TensorVecFor(Isa isa);
// The widest available ISA's table (what the tensor kernels use).
const TensorVecTable& TensorVec();

namespace ref {
const TensorVecTable& TensorVecTableRef();
}
namespace avx2 {
const TensorVecTable& TensorVecTableAvx2();
}
namespace avx512 {
const TensorVecTable& TensorVecTableAvx512();
}

}  // namespace kiln::cpu
