// A block-quantized weight matrix as the quantized kernels read it: the
// GGUF bytes of W[N, K] row by row, used in place (no copy, no dequantized
// form), and what pairs with it (the activation block size).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/embedding.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln::cpu {

// The block types the quantized linear kernels run: Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K.
const std::vector<DType>& QuantKernelTypes();
bool IsQuantKernelType(DType dtype);

// The block size activations are quantized in for weights of `dtype`: 32
// for the 32-value formats, 256 for the k-quants. REQUIRES: IsQuantKernelType(dtype).
int QuantActivationBlock(DType dtype);

// Decodes one stored row of a block-quantized table (embedding lookups),
// or null for a dtype without one.
RowDequantizer QuantRowDequantizer(DType dtype);

// Not owning: the bytes must outlive it (the WeightStore's mapping).
class QuantMatrix {
 public:
  QuantMatrix() = default;

  DType dtype() const { return dtype_; }
  int64_t rows() const { return n_; }  // N, the output features
  int64_t cols() const { return k_; }  // K, the input features
  const uint8_t* data() const { return data_; }
  int64_t row_bytes() const { return row_bytes_; }
  size_t bytes() const { return static_cast<size_t>(n_ * row_bytes_); }
  int activation_block() const { return QuantActivationBlock(dtype_); }

 private:
  friend Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n,
                                               int64_t k);
  DType dtype_ = DType::kQ8_0;
  const uint8_t* data_ = nullptr;
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t row_bytes_ = 0;
};

// Wraps row-major W[n, k] of `dtype` stored in `nbytes` bytes at `data`.
// Fails on a type the kernels do not run, non-positive sizes, K that is not
// a whole number of blocks, or a byte count other than the shape's.
Expected<QuantMatrix> MakeQuantMatrix(DType dtype, const void* data, uint64_t nbytes, int64_t n, int64_t k);

}  // namespace kiln::cpu
