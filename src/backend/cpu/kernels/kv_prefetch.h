// Asking for rows of the paged KV cache before attention reads them: a
// sequence's blocks lie anywhere in the pools, where the hardware
// prefetchers do not follow.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::cpu {

// Rows [j_begin, j_end) of one KV head's block, keys and values: row j's
// row_bytes at offset + j * row_stride bytes into k_pool and v_pool. Only
// a hint; nothing is read.
inline void PrefetchKvRows(const void* k_pool, const void* v_pool, int64_t offset, int64_t row_stride,
                           int64_t row_bytes, int j_begin, int j_end) {
#if defined(__x86_64__)
  for (int j = j_begin; j < j_end; ++j) {
    const char* k = static_cast<const char*>(k_pool) + offset + j * row_stride;
    const char* v = static_cast<const char*>(v_pool) + offset + j * row_stride;
    for (int64_t line = 0; line < row_bytes; line += 64) {
      _mm_prefetch(k + line, _MM_HINT_T0);
      _mm_prefetch(v + line, _MM_HINT_T0);
    }
  }
#else
  (void)k_pool, (void)v_pool, (void)offset, (void)row_stride, (void)row_bytes, (void)j_begin, (void)j_end;
#endif
}

}  // namespace kiln::cpu
