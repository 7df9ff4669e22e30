// Writing to and gathering from the paged KV cache.
#include "backend/cpu/kernels/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/qkernels/qkernel_table.h"

namespace kiln::cpu {
namespace {

size_t ElementBytes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kI8: return 1;
    default: return 2;
  }
}

// One token's int8 row and scales as floats.
void LoadInt8Row(const int8_t* q, const float* scales, int64_t heads, int64_t head_dim, float* dst) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t c = 0; c < head_dim; ++c) dst[h * head_dim + c] = scales[h] * static_cast<float>(q[h * head_dim + c]);
  }
}

// Converts one row of n floats to the cache's dtype.
void StoreRow(const KernelTable& kernels, DType dtype, const float* src, void* dst, int64_t n) {
  switch (dtype) {
    case DType::kBF16: return kernels.f32_to_bf16(ConvertArgs{src, n, dst, n, 1, n});
    case DType::kF16: return kernels.f32_to_f16(ConvertArgs{src, n, dst, n, 1, n});
    default: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

void LoadRow(const KernelTable& kernels, DType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DType::kBF16: return kernels.bf16_to_f32(ConvertArgs{src, n, dst, n, 1, n});
    case DType::kF16: return kernels.f16_to_f32(ConvertArgs{src, n, dst, n, 1, n});
    default: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace

Status CheckKvCache(const KvCacheView& cache) {
  if (cache.dtype != DType::kF32 && cache.dtype != DType::kF16 && cache.dtype != DType::kBF16 &&
      cache.dtype != DType::kI8) {
    return Unsupported("kv cache: dtype {} (f32, f16, bf16 or i8 only)", DTypeName(cache.dtype));
  }
  if (cache.dtype == DType::kI8 && (cache.k_scale == nullptr || cache.v_scale == nullptr)) {
    return InvalidArgument("kv cache: an i8 cache needs its K and V scale pools");
  }
  if (cache.num_blocks <= 0 || cache.block_size <= 0 || cache.kv_heads <= 0 || cache.head_dim <= 0) {
    return InvalidArgument(
        "kv cache: blocks {}, block size {}, kv heads {}, head dim {} must all be positive", cache.num_blocks,
        cache.block_size, cache.kv_heads, cache.head_dim);
  }
  if (cache.k == nullptr || cache.v == nullptr) return InvalidArgument("kv cache: missing K or V pool");
  return Status::Ok();
}

void KvWrite(const KernelContext& ctx, const KvCacheView& cache, int64_t tokens, const int32_t* slots,
             const float* k, int64_t ldk, const float* v, int64_t ldv) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t n = cache.row_elements();
  const size_t row_bytes = static_cast<size_t>(n) * ElementBytes(cache.dtype);
  if (cache.dtype == DType::kI8) {
    const QuantKernelTable& qkernels = QuantKernelsFor(ctx.isa);
    ParallelRanges(ctx, tokens, std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        if (slots[t] < 0) continue;
        const int64_t slot = slots[t];
        auto* kq = static_cast<int8_t*>(cache.k) + slot * n;
        auto* vq = static_cast<int8_t*>(cache.v) + slot * n;
        qkernels.kv_quantize({k + t * ldk, ldk, 1, cache.kv_heads, cache.head_dim, kq, cache.k_scale + slot * cache.kv_heads});
        qkernels.kv_quantize({v + t * ldv, ldv, 1, cache.kv_heads, cache.head_dim, vq, cache.v_scale + slot * cache.kv_heads});
      }
    });
    return;
  }
  ParallelRanges(ctx, tokens, std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      if (slots[t] < 0) continue;
      const size_t offset = static_cast<size_t>(slots[t]) * row_bytes;
      StoreRow(kernels, cache.dtype, k + t * ldk, static_cast<uint8_t*>(cache.k) + offset, n);
      StoreRow(kernels, cache.dtype, v + t * ldv, static_cast<uint8_t*>(cache.v) + offset, n);
    }
  });
}

void GatherKv(const KernelContext& ctx, const KvCacheView& cache, const int32_t* block_table,
              int64_t positions, float* k_out, int64_t ldk, float* v_out, int64_t ldv) {
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t n = cache.row_elements();
  const size_t row_bytes = static_cast<size_t>(n) * ElementBytes(cache.dtype);
  ParallelRanges(ctx, positions, std::max<int64_t>(1, 16384 / n), [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      const int32_t block = block_table[p / cache.block_size];
      if (block < 0) {
        // A released block (before a sliding window): zeros, which the
        // mask gives no weight.
        std::fill(k_out + p * ldk, k_out + p * ldk + n, 0.0f);
        std::fill(v_out + p * ldv, v_out + p * ldv + n, 0.0f);
        continue;
      }
      const int64_t slot = static_cast<int64_t>(block) * cache.block_size + p % cache.block_size;
      const size_t offset = static_cast<size_t>(slot) * row_bytes;
      if (cache.dtype == DType::kI8) {
        LoadInt8Row(static_cast<const int8_t*>(cache.k) + offset, cache.k_scale + slot * cache.kv_heads,
                    cache.kv_heads, cache.head_dim, k_out + p * ldk);
        LoadInt8Row(static_cast<const int8_t*>(cache.v) + offset, cache.v_scale + slot * cache.kv_heads,
                    cache.kv_heads, cache.head_dim, v_out + p * ldv);
        continue;
      }
      LoadRow(kernels, cache.dtype, static_cast<const uint8_t*>(cache.k) + offset, k_out + p * ldk, n);
      LoadRow(kernels, cache.dtype, static_cast<const uint8_t*>(cache.v) + offset, v_out + p * ldv, n);
    }
  });
}

}  // namespace kiln::cpu
