// The thread pool: coverage of every index, the static split, nesting,
// concurrent callers, rapid reuse and shutdown.
#include "core/thread_pool.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/cpu_info.h"

namespace kiln {
namespace thread_pool_tests {

TEST(ThreadPool, StaticRangeCoversContiguouslyAndBalances) {
  for (int64_t n : {0, 1, 2, 5, 16, 17, 1000}) {
    for (int threads : {1, 2, 3, 7}) {
      int64_t expected_begin = 0;
      for (int t = 0; t < threads; ++t) {
        IndexRange r = ThreadPool::StaticRange(n, threads, t);
        EXPECT_EQ(r.begin, expected_begin) << "n=" << n << " threads=" << threads << " t=" << t;
        EXPECT_GE(r.end - r.begin, n / threads);
        EXPECT_LE(r.end - r.begin, n / threads + 1);
        expected_begin = r.end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

TEST(ThreadPool, EveryIndexVisitedExactlyOnceInTheStaticSplit) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 100, 1001}) {
      for (int64_t min_per_thread : {1, 4, 1000}) {
        std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
        std::vector<IndexRange> seen(static_cast<size_t>(threads), IndexRange{-1, -1});
        std::atomic<int> calls{0};
        pool.ParallelFor(n, min_per_thread, [&](int64_t begin, int64_t end, int thread) {
          ASSERT_GE(thread, 0);
          ASSERT_LT(thread, threads);
          EXPECT_LT(begin, end);
          seen[static_cast<size_t>(thread)] = {begin, end};
          calls.fetch_add(1);
          for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << "index " << i;
        const int64_t useful = (n + min_per_thread - 1) / min_per_thread;
        const int used = static_cast<int>(std::min<int64_t>(threads, useful));
        EXPECT_EQ(calls.load(), n == 0 ? 0 : used);
        for (int t = 0; t < used && n > 0; ++t) {
          IndexRange want = ThreadPool::StaticRange(n, used, t);
          EXPECT_EQ(seen[static_cast<size_t>(t)].begin, want.begin);
          EXPECT_EQ(seen[static_cast<size_t>(t)].end, want.end);
        }
      }
    }
  }
}

TEST(ThreadPool, NestedCallsRunSeriallyOnTheCallingThread) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> visits(4 * 50);
  std::atomic<int> mismatched_threads{0};
  pool.ParallelFor(4, [&](int64_t begin, int64_t end, int outer_thread) {
    for (int64_t o = begin; o < end; ++o) {
      int inner_calls = 0;
      pool.ParallelFor(50, [&](int64_t b, int64_t e, int inner_thread) {
        ++inner_calls;
        if (inner_thread != outer_thread) mismatched_threads.fetch_add(1);
        for (int64_t i = b; i < e; ++i) visits[static_cast<size_t>(o * 50 + i)].fetch_add(1);
      });
      EXPECT_EQ(inner_calls, 1);  // the whole inner range at once
    }
  });
  for (auto& v : visits) EXPECT_EQ(v.load(), 1);
  EXPECT_EQ(mismatched_threads.load(), 0);
}

TEST(ThreadPool, NestedCallIntoAnotherPoolAlsoRunsSerially) {
  ThreadPool outer(2), inner(2);
  std::atomic<int> total{0};
  outer.ParallelFor(2, [&](int64_t, int64_t, int) {
    inner.ParallelFor(10, [&](int64_t b, int64_t e, int) { total.fetch_add(static_cast<int>(e - b)); });
  });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPool, ManyRapidCalls) {
  ThreadPool pool(2);
  std::vector<int64_t> partial(2, 0);
  int64_t expected = 0;
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 37;
    partial.assign(2, 0);
    pool.ParallelFor(n, [&](int64_t b, int64_t e, int thread) {
      for (int64_t i = b; i < e; ++i) partial[static_cast<size_t>(thread)] += i + call;
    });
    const int64_t got = partial[0] + partial[1];
    expected = n * (n - 1) / 2 + n * call;
    ASSERT_EQ(got, expected) << "call " << call;
  }
}

TEST(ThreadPool, CallsFromSeveralThreadsAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int i = 0; i < 500; ++i) {
      pool.ParallelFor(8, [&](int64_t b, int64_t e, int thread) {
        if (thread == 0 && inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        total.fetch_add(e - b);
        if (thread == 0) inside.fetch_sub(1);
      });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * 8);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(ThreadPool, DestructionWhileIdle) {
  for (int round = 0; round < 20; ++round) {
    auto pool = std::make_unique<ThreadPool>(3);
    if (round % 2 == 1) {
      std::atomic<int> n{0};
      pool->ParallelFor(3, [&](int64_t b, int64_t e, int) { n.fetch_add(static_cast<int>(e - b)); });
      EXPECT_EQ(n.load(), 3);
    }
    // Long enough for the workers to give up spinning and sleep in the kernel.
    if (round % 4 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.reset();
  }
}

TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::set<int> threads;
    std::mutex mutex;
    pool.ParallelFor(3, [&](int64_t, int64_t, int thread) {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(thread);
    });
    EXPECT_EQ(threads, (std::set<int>{0, 1, 2}));
  }
}

// With more threads than cores and workers asleep, the caller often runs
// ranges whose worker has not started; each range must still be called
// once, as its own index.
TEST(ThreadPool, RangesKeepTheirIndexWhoeverRunsThem) {
  ThreadPool pool(4);
  for (int round = 0; round < 40; ++round) {
    if (round % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<std::atomic<int>> calls(4);
    std::atomic<int> wrong_index{0};
    pool.ParallelFor(4 * 25, [&](int64_t begin, int64_t end, int thread) {
      IndexRange want = ThreadPool::StaticRange(100, 4, thread);
      if (begin != want.begin || end != want.end) wrong_index.fetch_add(1);
      calls[static_cast<size_t>(thread)].fetch_add(1);
    });
    for (auto& c : calls) ASSERT_EQ(c.load(), 1) << "round " << round;
    ASSERT_EQ(wrong_index.load(), 0);
  }
}

TEST(ThreadPool, PinnedPoolRuns) {
  ThreadPoolOptions options;
  options.pin_threads = true;
  ThreadPool pool(2, options);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(100, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 4950);
}

// The pool on libgomp's team, loaded here as oneDNN would load it.
bool LoadOpenMp() { return dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL) != nullptr; }

TEST(ThreadPool, OpenMpTeamKeepsTheStaticSplitAndIndices) {
  if (!LoadOpenMp()) {
    GTEST_SKIP() << "libgomp.so.1 is not installed";
  }
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads, ThreadPoolOptions{.share_openmp_team = true});
    ASSERT_TRUE(pool.on_openmp_team());
    for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
      std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
      std::vector<IndexRange> seen(static_cast<size_t>(threads), IndexRange{-1, -1});
      std::mutex mutex;
      std::set<std::thread::id> os_threads;
      pool.ParallelFor(n, [&](int64_t begin, int64_t end, int thread) {
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, threads);
        seen[static_cast<size_t>(thread)] = {begin, end};
        {
          std::lock_guard<std::mutex> lock(mutex);
          os_threads.insert(std::this_thread::get_id());
        }
        for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << "index " << i;
      const int used = static_cast<int>(std::min<int64_t>(threads, n));
      for (int t = 0; t < used; ++t) {
        const IndexRange want = ThreadPool::StaticRange(n, used, t);
        EXPECT_EQ(seen[static_cast<size_t>(t)].begin, want.begin) << threads << " threads, n " << n;
        EXPECT_EQ(seen[static_cast<size_t>(t)].end, want.end);
      }
      // Ranges ran on the team's threads, not all on the caller.
      if (used > 1) {
        EXPECT_GT(os_threads.size(), 1u);
      }
    }
  }
}

TEST(ThreadPool, OpenMpTeamRunsNestedCallsSerially) {
  if (!LoadOpenMp()) {
    GTEST_SKIP() << "libgomp.so.1 is not installed";
  }
  ThreadPool pool(2, ThreadPoolOptions{.share_openmp_team = true});
  std::vector<std::atomic<int>> visits(4 * 50);
  std::atomic<int> mismatched_threads{0};
  pool.ParallelFor(4, [&](int64_t begin, int64_t end, int outer_thread) {
    for (int64_t o = begin; o < end; ++o) {
      pool.ParallelFor(50, [&](int64_t b, int64_t e, int inner_thread) {
        if (inner_thread != outer_thread) mismatched_threads.fetch_add(1);
        for (int64_t i = b; i < e; ++i) visits[static_cast<size_t>(o * 50 + i)].fetch_add(1);
      });
    }
  });
  for (auto& v : visits) EXPECT_EQ(v.load(), 1);
  EXPECT_EQ(mismatched_threads.load(), 0);
}

TEST(ThreadPool, OneThreadPoolNeverUsesTheTeam) {
  LoadOpenMp();
  ThreadPool pool(1, ThreadPoolOptions{.share_openmp_team = true});
  EXPECT_FALSE(pool.on_openmp_team());
  int64_t sum = 0;
  pool.ParallelFor(10, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 45);
}

TEST(ThreadPool, DefaultPoolsAreSharedPerThreadCount) {
  ThreadPool& a = DefaultThreadPool(2);
  ThreadPool& b = DefaultThreadPool(2);
  ThreadPool& c = DefaultThreadPool(1);
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_EQ(a.num_threads(), 2);
  EXPECT_EQ(c.num_threads(), 1);
  EXPECT_EQ(DefaultThreadPool().num_threads(), GetCpuInfo().physical_cores);
  EXPECT_EQ(ThreadPool().num_threads(), GetCpuInfo().physical_cores);
}

}  // namespace thread_pool_tests
}  // namespace kiln
