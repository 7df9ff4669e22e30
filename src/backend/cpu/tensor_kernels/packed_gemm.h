// fp32 matrix products of the tensor ops (MatMul, Gemm, Einsum) on kiln's
// linear kernels (kernels/linear_simd.h): B is laid out once as the
// kernels' 16-column panels (at compile time for a weight, per call for an
// activation), then each (matrix, row block, panel range) cell runs the
// ISA's linear kernel. The plain loops these are tested against are here
// too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/cpu/kernels/kernel_context.h"
#include "graph/laid_out_weights.h"

namespace kiln::cpu {

// Floats of one k x n B in panels: ceil(n / 16) panels of k rows of 16.
int64_t PackedBFloats(int64_t k, int64_t n);

// Lays out B (element (kk, nn) at b[kk * stride_k + nn * stride_n]) times
// `scale` as panels in dst (PackedBFloats(k, n) floats; columns past n zero).
void PackB(const float* b, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, float scale, float* dst);

// `count` matrices, matrix i from b + offsets[i], packed one after another
// into dst on the context's threads.
void PackBMatrices(const KernelContext& ctx, const float* b, const int64_t* offsets, int64_t count, int64_t k,
                   int64_t n, int64_t stride_k, int64_t stride_n, float scale, float* dst);

// 64-byte aligned floats owned by a kernel (packed weights).
struct AlignedFloats {
  explicit AlignedFloats(int64_t count);
  float* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
};

// A weight's B, packed once: in the kernel's own memory, or the panels a
// compiled artifact stored for the node under `layout`, used where they are
// mapped (graph/laid_out_weights.h), so that loading one packs nothing.
class PackedWeightPanels {
 public:
  // Takes the stored panels of `floats` floats when `store` has them;
  // otherwise calls pack(dst) and records what it wrote (store may be null).
  PackedWeightPanels(LaidOutWeights* store, std::string_view node, std::string_view layout, int64_t floats,
                     const std::function<void(float*)>& pack);
  const float* data() const { return data_; }

 private:
  std::unique_ptr<AlignedFloats> own_;
  const float* data_ = nullptr;
};

// For i < batch: C_i[m x n] = A_i[m x k] * B_i (+ bias[n]), where A_i
// starts at a + a_offset[i] with rows lda apart, B_i is packed matrix
// b_index[i] of `packed`, and C_i starts at c + i * c_stride with rows ldc
// apart. Each element is one fp32 FMA chain over k.
struct PackedGemm {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const int64_t* a_offset = nullptr;
  const float* packed = nullptr;
  const int64_t* b_index = nullptr;
  const float* bias = nullptr;
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t c_stride = 0;
};
void RunPackedGemm(const KernelContext& ctx, const PackedGemm& g);

// The plain loops: C_i = A_i * B_i for i < batch, with A_i's (row, col)
// at a[a_index[i] * a_matrix + row * a_rs + col * a_cs] (B likewise), C
// contiguous [batch, m, n]. Sums in double for floating types.
template <typename T>
void ReferenceBatchedMatMul(int64_t batch, int64_t m, int64_t n, int64_t k, const T* a,
                            const int64_t* a_index, int64_t a_matrix, int64_t a_rs, int64_t a_cs, const T* b,
                            const int64_t* b_index, int64_t b_matrix, int64_t b_rs, int64_t b_cs, T* c);

// Copies src (dims src_dims, row-major) to dst with dst's axis i being
// src's axis perm[i].
void PermuteCopy(const float* src, const std::vector<int64_t>& src_dims, const std::vector<int>& perm,
                 float* dst);

// "kiln-avx2" and so on: the implementation the fast path runs for --plan.
const char* PackedGemmImpl();

}  // namespace kiln::cpu
