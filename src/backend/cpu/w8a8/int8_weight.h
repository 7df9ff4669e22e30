// Linear weights quantized to int8 per output channel (symmetric) and packed
// once, at load, into the layout the int8 GEMM kernels stream: panels of 16
// output rows, k in groups of 4 bytes (one vpdpbusd lane each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln::cpu {

// Rows per panel and k per group of the packed layout.
inline constexpr int kInt8PanelRows = 16;
inline constexpr int kInt8GroupK = 4;
// The longest row the int8 GEMM takes: an int32 accumulator holds any sum of
// this many products of |u8| <= 255 and |s8| <= 127 (the VNNI kernels add
// 128 to the activations).
inline constexpr int64_t kInt8MaxK = 65536;

// W[N, K] as q[n, k] * scale[n] with q in [-127, 127]: scale[n] =
// max_k |W[n, k]| / 127 (0 for a row of zeros) and q = W / scale rounded to
// nearest, ties to even. Packed as ceil(N / 16) panels; panel p holds, for
// each group g of 4 columns (K padded with zeros to a multiple of 4), 64
// bytes: byte 4r + j is q[16p + r, 4g + j] (rows past N are zero). Owns its
// memory (64-byte aligned); movable.
class Int8Weight {
 public:
  Int8Weight() = default;
  Int8Weight(Int8Weight&&) noexcept = default;
  Int8Weight& operator=(Int8Weight&&) noexcept = default;

  int64_t rows() const { return n_; }         // N, output features
  int64_t cols() const { return k_; }         // K, input features
  int64_t padded_cols() const { return kp_; }  // K rounded up to a multiple of 4
  int64_t panels() const { return (n_ + kInt8PanelRows - 1) / kInt8PanelRows; }
  const int8_t* panel_data() const { return data_.get(); }
  // Per output row: the scale, and sum_k q[n, k] (the VNNI kernels' offset
  // correction, times 128). Both padded to whole panels with zeros.
  const float* scales() const { return scales_.get(); }
  const int32_t* row_sums() const { return row_sums_.get(); }
  size_t bytes() const;
  bool empty() const { return data_ == nullptr; }

  // q[n, k]. REQUIRES: n < rows(), k < cols().
  int8_t At(int64_t n, int64_t k) const;

 private:
  friend Expected<Int8Weight> PackInt8Weight(DType dtype, const void* w, int64_t n, int64_t k);
  struct FreeAligned {
    void operator()(void* p) const;
  };

  int64_t n_ = 0, k_ = 0, kp_ = 0;
  std::unique_ptr<int8_t, FreeAligned> data_;
  std::unique_ptr<float, FreeAligned> scales_;
  std::unique_ptr<int32_t, FreeAligned> row_sums_;
};

// Quantizes and packs row-major W[n, k] of any dtype DequantizeRow reads
// (f32, f16, bf16 and the GGUF block formats). Fails on non-positive sizes,
// k beyond kInt8MaxK, non-finite weights (naming the row) or a failed
// allocation.
Expected<Int8Weight> PackInt8Weight(DType dtype, const void* w, int64_t n, int64_t k);

}  // namespace kiln::cpu
