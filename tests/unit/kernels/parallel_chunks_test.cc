// ParallelChunks: every index in exactly one chunk, each thread's own
// chunks claimed in order, and a stalled thread's share finished by the
// others.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace parallel_chunks_tests {

struct Call {
  int64_t begin, end;
  int thread;
};

std::vector<Call> RunChunks(ThreadPool* pool, int64_t n, int64_t chunk) {
  KernelContext ctx;
  ctx.pool = pool;
  std::mutex mu;
  std::vector<Call> calls;
  ParallelChunks(ctx, n, chunk, [&](int64_t begin, int64_t end, int thread) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({begin, end, thread});
  });
  return calls;
}

TEST(ParallelChunks, EveryIndexInExactlyOneWholeChunk) {
  for (int threads : {1, 2, 3, 5, 12}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1001}) {
      for (int64_t chunk : {1, 3, 4, 64, 2000}) {
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (const Call& c : RunChunks(&pool, n, chunk)) {
          ASSERT_LT(c.begin, c.end);
          EXPECT_EQ(c.begin % chunk, 0) << "a chunk starts on a chunk boundary";
          EXPECT_EQ(c.end, std::min(n, c.begin + chunk));
          for (int64_t i = c.begin; i < c.end; ++i) ++seen[static_cast<size_t>(i)];
        }
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(seen[static_cast<size_t>(i)], 1)
              << "threads=" << threads << " n=" << n << " chunk=" << chunk << " i=" << i;
        }
      }
    }
  }
}

TEST(ParallelChunks, AThreadRunsItsOwnShareInOrder) {
  ThreadPool pool(2);
  for (int round = 0; round < 20; ++round) {
    // The first chunk each thread ran, then every later chunk of its own
    // run in increasing order until it starts helping from another's end.
    std::map<int, std::vector<int64_t>> by_thread;
    for (const Call& c : RunChunks(&pool, 64, 1)) by_thread[c.thread].push_back(c.begin);
    for (const auto& [thread, begins] : by_thread) {
      ASSERT_FALSE(begins.empty());
      EXPECT_TRUE(begins.front() == 0 || begins.front() == 32) << "a thread starts at a share's front";
      size_t ordered = 1;
      while (ordered < begins.size() && begins[ordered] == begins[ordered - 1] + 1) ++ordered;
      for (size_t k = ordered + 1; k < begins.size(); ++k) {
        EXPECT_LT(begins[k], begins[k - 1]) << "help is taken from the back";
      }
    }
  }
}

TEST(ParallelChunks, AStalledThreadsShareIsFinishedByTheOthers) {
  ThreadPool pool(2);
  KernelContext ctx;
  ctx.pool = &pool;
  // Chunk 8, the front of the second thread's share, stalls until every
  // other chunk has run: only a thread taking the rest of that share from
  // its back can end the wait before the deadline.
  std::atomic<int> done{0};
  std::atomic<bool> timed_out{false};
  ParallelChunks(ctx, 16, 1, [&](int64_t begin, int64_t, int) {
    if (begin == 8) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (done.load() < 15) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    done.fetch_add(1);
  });
  EXPECT_FALSE(timed_out) << "the stalled thread's share was left to it";
  EXPECT_EQ(done.load(), 16);
}

TEST(ParallelChunks, WithoutAPoolOneCallCoversAll) {
  std::vector<Call> calls = RunChunks(nullptr, 100, 7);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].begin, 0);
  EXPECT_EQ(calls[0].end, 100);
}

}  // namespace parallel_chunks_tests
}  // namespace kiln::cpu
