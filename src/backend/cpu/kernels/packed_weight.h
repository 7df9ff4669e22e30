// Linear-layer weights rearranged once, at load, into the layout the linear
// kernels stream: panels of 16 output rows interleaved along K.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/memory_domain.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

// W[N, K] as ceil(N / 16) panels; panel p holds rows 16p .. 16p+15 as K
// consecutive k-rows of 16 elements (rows past N are zero). Within a k-row
// F32 and F16 keep row order; BF16 stores row j at position 2j for j < 8 and
// 2(j - 8) + 1 for j >= 8 (the AVX2 kernel splits it with a shift and a
// mask). The buffer is 64-byte aligned, in huge-page memory where the
// system allows (weight_memory.h). Owns its memory; movable.
class PackedWeight {
 public:
  PackedWeight() = default;
  PackedWeight(PackedWeight&&) noexcept = default;
  PackedWeight& operator=(PackedWeight&&) noexcept = default;

  DType dtype() const { return dtype_; }
  int64_t rows() const { return n_; }  // N, the output features
  int64_t cols() const { return k_; }  // K, the input features
  int64_t panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  const void* data() const { return data_.data(); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_.data() == nullptr; }

  // W[n, k] as float. REQUIRES: n < rows(), k < cols().
  float At(int64_t n, int64_t k) const;

  // Position of W[n, k] in data(), in elements (dtype-independent but for
  // BF16's interleave).
  static int64_t Offset(DType dtype, int64_t n, int64_t k, int64_t cols);

 private:
  friend Expected<PackedWeight> PackLinearWeight(DType dtype, const void* w, int64_t n, int64_t k,
                                                 ThreadPool* pool);
  friend Expected<PackedWeight> AdoptPackedLinearWeight(DType dtype, int64_t n, int64_t k, DomainBuffer panels);
  DType dtype_ = DType::kF32;
  int64_t n_ = 0;
  int64_t k_ = 0;
  size_t bytes_ = 0;
  DomainBuffer data_;
};

// Packs row-major W[n, k] of F32, F16 or BF16 (bytes as safetensors stores
// them), on `pool`'s threads when given. Fails on another dtype,
// non-positive sizes, or a size that overflows.
Expected<PackedWeight> PackLinearWeight(DType dtype, const void* w, int64_t n, int64_t k,
                                        ThreadPool* pool = nullptr);

// The panels of a [n, k] weight of `dtype` packed earlier (PackLinearWeight's
// bytes, stored in an artifact). Fails when `panels` is not the size that
// layout takes, or is not 64-byte aligned.
Expected<PackedWeight> AdoptPackedLinearWeight(DType dtype, int64_t n, int64_t k, DomainBuffer panels);

// The kernels' element type for a dtype. REQUIRES: dtype is F32, F16 or BF16.
ElemType ElemTypeOf(DType dtype);

}  // namespace kiln::cpu
