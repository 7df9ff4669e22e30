// A persistent pool of worker threads for data-parallel kernels: the caller
// hands out a range, every thread takes a fixed contiguous piece of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

struct ThreadPoolOptions {
  // Pins worker i to the i-th CPU the process may run on (the calling thread
  // is left alone). Off by default: pinning helps only on a quiet machine.
  bool pin_threads = false;
  // Runs every ParallelFor on the OpenMP team of the calling thread (libgomp,
  // where the process has it loaded: oneDNN brings it) instead of the pool's
  // own workers. A graph that mixes kiln's kernels with oneDNN's then runs
  // on one set of threads: those oneDNN just used are still spinning when
  // kiln's next kernel starts, rather than competing with kiln's workers
  // for the cores. Without libgomp in the process the pool runs as usual.
  bool share_openmp_team = false;
};

// The half-open index range [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};

class ThreadPool {
 public:
  // A pool of `num_threads` threads in all: num_threads - 1 workers plus the
  // thread that calls ParallelFor. num_threads <= 0 means one per physical core.
  explicit ThreadPool(int num_threads = 0, ThreadPoolOptions options = {});
  // Stops and joins the workers. REQUIRES: no ParallelFor is running.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that take part in a ParallelFor, the caller included.
  int num_threads() const { return num_threads_; }

  // Whether ParallelFor runs on the OpenMP team (share_openmp_team, and
  // libgomp is loaded).
  bool on_openmp_team() const { return openmp_parallel_ != nullptr; }

  // Calls body(begin, end, thread) on disjoint contiguous ranges that together
  // cover [0, n), and returns when all are done. Range t is
  // StaticRange(n, threads, t) with threads = min(num_threads(),
  // ceil(n / min_per_thread)), so the split is a pure function of n,
  // min_per_thread and the pool size; empty ranges are not called. The calling
  // thread runs range 0, worker t range t; a range whose worker has not
  // started it by the time the caller is done with its own is run by the
  // caller instead (so a descheduled worker cannot stall the call), still as
  // range t. `thread` = t is unique among the bodies running at any moment:
  // use it to index per-thread scratch.
  // A call made from inside a body (of any pool) runs the whole range serially
  // on the current thread with that thread's index, so nesting never deadlocks.
  // Calls from several outside threads at once are serialized.
  // REQUIRES: body does not throw, and no range waits for another one (they
  // may run one after the other on the same thread).
  template <typename Body>
  void ParallelFor(int64_t n, int64_t min_per_thread, Body&& body) {
    using B = std::remove_reference_t<Body>;
    Run(
        n, min_per_thread,
        [](void* ctx, int64_t begin, int64_t end, int thread) {
          (*static_cast<B*>(ctx))(begin, end, thread);
        },
        const_cast<void*>(static_cast<const void*>(&body)));
  }
  template <typename Body>
  void ParallelFor(int64_t n, Body&& body) {
    ParallelFor(n, 1, std::forward<Body>(body));
  }

  // Piece t of [0, n) split into `threads` contiguous near-equal pieces (the
  // first n % threads pieces one longer).
  static IndexRange StaticRange(int64_t n, int threads, int t);

 private:
  using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);

  void Run(int64_t n, int64_t min_per_thread, RangeFn fn, void* ctx);
  void RunOnOpenMpTeam(int64_t n, int threads, RangeFn fn, void* ctx);
  void WorkerLoop(int index);
  void WaitForWorkers();

  const int num_threads_;
  // libgomp's entry points, when the pool shares the OpenMP team.
  using OpenMpParallelFn = void (*)(void (*)(void*), void*, unsigned, unsigned);
  OpenMpParallelFn openmp_parallel_ = nullptr;
  int (*openmp_thread_num_)() = nullptr;
  int (*openmp_team_size_)() = nullptr;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one ParallelFor at a time

  // Claims range t of job `sequence` for the calling thread; false if some
  // thread already did.
  bool ClaimRange(int t, uint64_t sequence);
  // Runs range t of the current job as thread t and counts it done.
  void RunRange(int t, int threads);

  // The job being run; written by the caller before `job_` changes.
  RangeFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;

  // The current job: its sequence number above its thread count, in one word
  // so that a worker reads both consistently.
  std::atomic<uint64_t> job_{0};
  // The job sequence's low 32 bits: the futex word idle workers sleep on.
  // `sleepers_` counts workers blocked in the kernel, so that a job costs a
  // wake-up system call only when someone actually sleeps.
  std::atomic<uint32_t> wake_word_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  // claimed_[t]: the last job sequence whose range t some thread took.
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_;
  // Ranges 1.. of the current job not yet finished; the caller waits for zero.
  std::atomic<uint32_t> pending_{0};
  std::atomic<bool> caller_sleeping_{false};
};

// A process-wide pool of `threads` threads (<= 0: one per physical core),
// created on first request and kept until exit. Different counts give
// different pools.
ThreadPool& DefaultThreadPool(int threads = 0);

}  // namespace kiln
