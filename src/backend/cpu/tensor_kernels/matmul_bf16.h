// Matrix products in bf16 on oneDNN's matmul (AVX-512 BF16 / AMX kernels):
// C[i] = A[i] * B[i] (+ bias) for i < batch, A and C f32 in the caller's
// memory; A is rounded to bf16 (nearest even) into the scratch each call;
// B is rounded to bf16 once, when the kernel is made, when it is a weight
// (or taken as a compiled artifact stores it, in the format oneDNN picked),
// else each call; products accumulate in fp32 and C is written in fp32.
#pragma once

#include <cstdint>

#include "backend/cpu/tensor_kernels/laid_out_floats.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

struct Bf16MatMulSpec {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // A is input 0: matrix i at i * m * k floats, [m, k] row-major, or with
  // trans_a stored [k, m].
  bool trans_a = false;
  // B: b_batch (1, shared by every output matrix, or batch) matrices of
  // [k, n], or with trans_b stored [n, k]. `b` non-null: a weight, read
  // now and multiplied by b_scale before rounding; null: input 1 per call
  // (b_scale must then be 1).
  const float* b = nullptr;
  int64_t b_batch = 1;
  bool trans_b = false;
  float b_scale = 1.0f;
  // A bias row [n] added to every row: read now from `bias`, or per call
  // from input `bias_input` (-1: none).
  const float* bias = nullptr;
  int bias_input = -1;
  // Where a weight B, rounded and reordered, is found already (an
  // artifact's) or recorded once made (compiling one).
  LaidOutSlot slot;
};

// The kernel (output 0 = C, contiguous [batch, m, n]); an error when oneDNN
// refuses the shape.
Expected<TensorKernel> MakeOneDnnBf16MatMul(const Bf16MatMulSpec& spec);

}  // namespace kiln::cpu
