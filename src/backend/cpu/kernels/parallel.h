// Internal helpers of the public kernel functions: splitting work over the
// context's threads, and per-thread scratch memory.
#pragma once

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

// Independent scratch areas a thread may hold at the same time.
enum class ScratchSlot { kLinearWeights, kLinearInput, kAttention, kCount };

// This thread's 64-byte aligned scratch for `slot`, at least `floats` long.
// Grows on demand and is kept for the thread's lifetime, so steady-state
// calls allocate nothing.
float* ThreadScratch(ScratchSlot slot, int64_t floats);

}  // namespace kiln::cpu
