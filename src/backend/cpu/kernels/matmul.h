// Batched fp32 matrix products on strided operands: the two products of
// attention decomposed into matmul + softmax + matmul, batched over heads.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// A batch of row-major matrices: matrix i starts at data + i * batch_stride
// and its rows are ld elements apart.
struct ConstMatrixBatch {
  const float* data;
  int64_t ld;
  int64_t batch_stride;
};
struct MatrixBatch {
  float* data;
  int64_t ld;
  int64_t batch_stride;
};

// For i < batch: C_i[m x n] = A_i[m x k] * B_j (transpose_b: B_j is n x k
// and used transposed; else k x n), with j = i / b_group so that query
// heads share KV heads (GQA). A B runs each C element as one FMA chain over
// k in increasing order; A B^T sums in vector lanes and a fixed tree.
// REQUIRES: C overlaps neither A nor B.
void MatMul(const KernelContext& ctx, int64_t batch, int64_t m, int64_t n, int64_t k, ConstMatrixBatch a,
            ConstMatrixBatch b, bool transpose_b, MatrixBatch c, int64_t b_group = 1);

}  // namespace kiln::cpu
