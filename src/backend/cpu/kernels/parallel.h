// Internal helpers of the public kernel functions: splitting work over the
// context's threads, and per-thread scratch memory.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// Calls body(begin, end, thread) over [0, n) on the context's threads (see
// ThreadPool::ParallelFor), or once on the caller without a pool.
template <typename Body>
void ParallelRanges(const KernelContext& ctx, int64_t n, int64_t min_per_thread, Body&& body) {
  if (n <= 0) return;
  if (ctx.pool == nullptr) {
    body(int64_t{0}, n, 0);
    return;
  }
  ctx.pool->ParallelFor(n, min_per_thread, std::forward<Body>(body));
}

// Calls body(begin, end, thread) on chunks of `chunk` indices of [0, n)
// that the context's threads claim one at a time, so that a thread that
// falls behind (descheduled, on slower memory) leaves its share to the
// others instead of holding up the whole call. Only for work whose results
// do not depend on how it is split.
template <typename Body>
void ParallelChunks(const KernelContext& ctx, int64_t n, int64_t chunk, Body&& body) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (ctx.pool == nullptr || chunks == 1) {
    body(int64_t{0}, n, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  ctx.pool->ParallelFor(std::min<int64_t>(ctx.num_threads(), chunks), 1, [&](int64_t, int64_t, int thread) {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      body(c * chunk, std::min(n, (c + 1) * chunk), thread);
    }
  });
}

// Items per chunk for ParallelChunks over a weight matrix's row groups or
// panels of `item_bytes` each: about 16 chunks per thread, so that a thread
// that falls behind costs little, but none under 64 KiB of weights, so that
// claiming stays a small part of the work.
inline int64_t WeightChunk(const KernelContext& ctx, int64_t items, int64_t item_bytes) {
  constexpr int64_t kChunksPerThread = 16;
  constexpr int64_t kMinChunkBytes = 64 << 10;
  const int64_t by_count = items / (ctx.num_threads() * kChunksPerThread);
  const int64_t by_bytes = (kMinChunkBytes + item_bytes - 1) / std::max<int64_t>(item_bytes, 1);
  return std::max<int64_t>({by_count, by_bytes, 1});
}

// Independent scratch areas a thread may hold at the same time.
enum class ScratchSlot { kLinearWeights, kLinearInput, kAttention, kCount };

// This thread's 64-byte aligned scratch for `slot`, at least `floats` long.
// Grows on demand and is kept for the thread's lifetime, so steady-state
// calls allocate nothing.
float* ThreadScratch(ScratchSlot slot, int64_t floats);

}  // namespace kiln::cpu
