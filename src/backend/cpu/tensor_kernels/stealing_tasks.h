// Tasks split between a pool's threads in contiguous runs, with the rest of
// a late thread's run taken by the others.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "core/thread_pool.h"

namespace kiln::cpu {

// Runs body(task, task + 1, thread) for every task in [0, n) on the pool's
// threads (`thread` unique among the bodies running at once, for per-thread
// scratch): each thread takes the tasks of its own contiguous run in order
// (what one task leaves in its caches, the next uses), then the rest of the
// other runs, one task at a time, so that a thread the machine deschedules
// or wakes late (two cores shared with other work) does not leave the call
// waiting on it.
constexpr int kMaxStealingRuns = 64;

struct alignas(64) StealingRun {
  std::atomic<int64_t> next{0};
  int64_t end = 0;
};

template <typename Body>
void RunStealingTasks(ThreadPool& pool, int64_t n, const Body& body) {
  const int threads =
      std::min<int>(kMaxStealingRuns, static_cast<int>(std::min<int64_t>(n, pool.num_threads())));
  std::array<StealingRun, kMaxStealingRuns> runs;
  for (int t = 0; t < threads; ++t) {
    const IndexRange r = ThreadPool::StaticRange(n, threads, t);
    runs[static_cast<size_t>(t)].next.store(r.begin, std::memory_order_relaxed);
    runs[static_cast<size_t>(t)].end = r.end;
  }
  pool.ParallelFor(threads, 1, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t own = begin; own < end; ++own) {
      for (int k = 0; k < threads; ++k) {
        StealingRun& run = runs[static_cast<size_t>((own + k) % threads)];
        for (int64_t task = run.next.fetch_add(1, std::memory_order_relaxed); task < run.end;
             task = run.next.fetch_add(1, std::memory_order_relaxed))
          body(task, task + 1, thread);
      }
    }
  });
}

}  // namespace kiln::cpu
