// Internal helpers of the public kernel functions: splitting work over the
// context's threads, and per-thread scratch memory.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "backend/cpu/kernels/kernel_context.h"

namespace kiln::cpu {

// Elementwise rows below this many elements stay on one thread.
constexpr int64_t kMinElementwisePerThread = 16384;

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
// others instead of holding up the whole call. Each thread starts on its
// own contiguous share of the chunks and claims them in order, so that the
// chunks one thread runs follow each other in memory: a pass that
// prefetches the next chunk's weights fetches its own (claimed round-robin,
// they went to the other thread's cache, and the down projection's 2-thread
// decode was slower than one thread's); a thread done with its share takes
// chunks from the end of another's. Only for work whose results do not
// depend on how it is split.
template <typename Body>
void ParallelChunks(const KernelContext& ctx, int64_t n, int64_t chunk, Body&& body) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (ctx.pool == nullptr || chunks == 1) {
    body(int64_t{0}, n, 0);
    return;
  }
  const int64_t shares = std::min<int64_t>(ctx.num_threads(), chunks);
  // A share's unclaimed chunks [front, back), packed in one word so that its
  // owner (from the front) and a helper (from the back) claim atomically.
  struct alignas(64) Share {
    std::atomic<uint64_t> range;
  };
  constexpr int64_t kStackShares = 8;
  Share stack_shares[kStackShares];
  std::unique_ptr<Share[]> heap_shares;
  Share* share = stack_shares;
  if (shares > kStackShares) {
    heap_shares = std::make_unique<Share[]>(static_cast<size_t>(shares));
    share = heap_shares.get();
  }
  for (int64_t s = 0; s < shares; ++s) {
    const auto front = static_cast<uint64_t>(s * chunks / shares),
               back = static_cast<uint64_t>((s + 1) * chunks / shares);
    share[s].range.store(front << 32 | back, std::memory_order_relaxed);
  }
  // Claims share s's first (or last) unclaimed chunk; -1 when none is left.
  auto claim = [&](int64_t s, bool from_front) -> int64_t {
    uint64_t range = share[s].range.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t front = range >> 32, back = range & 0xFFFFFFFFu;
      if (front >= back) return -1;
      const uint64_t next = from_front ? (front + 1) << 32 | back : front << 32 | (back - 1);
      if (share[s].range.compare_exchange_weak(range, next, std::memory_order_relaxed)) {
        return static_cast<int64_t>(from_front ? front : back - 1);
      }
    }
  };
  ctx.pool->ParallelFor(shares, 1, [&](int64_t first, int64_t last, int thread) {
    for (int64_t own = first; own < last; ++own) {
      for (int64_t c = claim(own, true); c >= 0; c = claim(own, true)) {
        body(c * chunk, std::min(n, (c + 1) * chunk), thread);
      }
      for (int64_t k = 1; k < shares; ++k) {
        const int64_t other = (own + k) % shares;
        for (int64_t c = claim(other, false); c >= 0; c = claim(other, false)) {
          body(c * chunk, std::min(n, (c + 1) * chunk), thread);
        }
      }
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

// Calls body(row_begin, row_end, col_begin, col_end, thread) on the cells of
// a grid over `rows` x `cols` that the context's threads claim one at a
// time: a many-row (prefill) product's weight columns (panels, row groups)
// in chunks of at least `min_cols`, about four per thread, and its rows in
// pieces of whole `row_tile`s only where the columns give fewer than two
// cells per thread (each row piece converts or re-reads the chunk's
// weights). A fixed cell per thread made the whole call wait for a thread
// slowed by another process; small column chunks also keep each cell's
// weights in cache while its rows pass. Only for work whose results do not
// depend on how it is split.
template <typename Body>
void ParallelGrid(const KernelContext& ctx, int64_t rows, int64_t row_tile, int64_t cols, int64_t min_cols,
                  Body&& body) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t threads = ctx.num_threads();
  const int64_t col_chunk = std::max<int64_t>({min_cols, (cols + 4 * threads - 1) / (4 * threads), 1});
  const int64_t col_chunks = (cols + col_chunk - 1) / col_chunk;
  const int64_t row_tiles = (rows + row_tile - 1) / row_tile;
  const int64_t row_pieces = std::clamp<int64_t>((2 * threads + col_chunks - 1) / col_chunks, 1, row_tiles);
  ParallelChunks(ctx, row_pieces * col_chunks, 1, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t cell = begin; cell < end; ++cell) {
      const int64_t piece = cell / col_chunks, chunk = cell % col_chunks;
      const int64_t tile_begin = row_tiles * piece / row_pieces, tile_end = row_tiles * (piece + 1) / row_pieces;
      const int64_t row_begin = tile_begin * row_tile, row_end = std::min(rows, tile_end * row_tile);
      const int64_t col_begin = chunk * col_chunk, col_end = std::min(cols, col_begin + col_chunk);
      if (row_begin < row_end) body(row_begin, row_end, col_begin, col_end, thread);
    }
  });
}

// Independent scratch areas a thread may hold at the same time.
enum class ScratchSlot { kLinearWeights, kLinearInput, kLinearOutput, kAttention, kCount };

// This thread's 64-byte aligned scratch for `slot`, at least `floats` long.
// Grows on demand and is kept for the thread's lifetime, so steady-state
// calls allocate nothing.
float* ThreadScratch(ScratchSlot slot, int64_t floats);

}  // namespace kiln::cpu
