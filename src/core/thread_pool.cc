// The thread pool: workers spin briefly for the next job, then sleep on a futex.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "core/cpu_info.h"

#if defined(__linux__)
#include <dlfcn.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {
namespace {

// How long an idle thread polls before it blocks in the kernel. Kernels of one
// forward pass follow each other within microseconds, so a short spin saves
// the wake-up system call between them without burning a shared core when
// the engine is idle.
constexpr auto kSpinTime = std::chrono::microseconds(20);

constexpr uint64_t kThreadBits = 10;  // job_ = sequence << 10 | threads
constexpr uint64_t kThreadMask = (uint64_t{1} << kThreadBits) - 1;
constexpr int kMaxThreads = static_cast<int>(kThreadMask);

// The pool whose body the current thread is running, and its index there.
thread_local bool tls_in_parallel_body = false;
thread_local int tls_thread_index = 0;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Blocks while *word == expected (or until a spurious wake-up).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word->wait(expected);
#endif
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, kMaxThreads + 1, nullptr, nullptr,
          0);
#else
  word->notify_all();
#endif
}

// Polls `done` with `pause` for kSpinTime; true if it became true meanwhile.
template <typename Done>
bool SpinUntil(Done done) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() - start > kSpinTime) return done();
  }
}

void PinCurrentThread(int nth_allowed_cpu) {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int count = CPU_COUNT(&allowed);
  if (count == 0) return;
  int want = nth_allowed_cpu % count;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (want-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
#else
  (void)nth_allowed_cpu;
#endif
}

// A symbol of a library already in the process (libgomp, loaded with
// oneDNN), or null: kiln itself does not link OpenMP.
void* LoadedSymbol(const char* name) {
#if defined(__linux__)
  return dlsym(RTLD_DEFAULT, name);
#else
  (void)name;
  return nullptr;
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, ThreadPoolOptions options)
    : num_threads_(std::clamp(num_threads > 0 ? num_threads : GetCpuInfo().physical_cores, 1, kMaxThreads)),
      claimed_(new std::atomic<uint64_t>[static_cast<size_t>(num_threads_)]) {
  for (int t = 0; t < num_threads_; ++t) claimed_[t].store(0, std::memory_order_relaxed);
  if (options.share_openmp_team && num_threads_ > 1) {
    // GOMP_parallel is what `#pragma omp parallel` compiles to with GCC.
    auto parallel = reinterpret_cast<OpenMpParallelFn>(LoadedSymbol("GOMP_parallel"));
    auto thread_num = reinterpret_cast<int (*)()>(LoadedSymbol("omp_get_thread_num"));
    auto team_size = reinterpret_cast<int (*)()>(LoadedSymbol("omp_get_num_threads"));
    if (parallel != nullptr && thread_num != nullptr && team_size != nullptr) {
      openmp_parallel_ = parallel;
      openmp_thread_num_ = thread_num;
      openmp_team_size_ = team_size;
      return;  // no workers of its own
    }
  }
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i, options] {
      if (options.pin_threads) PinCurrentThread(i);
      WorkerLoop(i);
    });
  }
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_relaxed);
  const uint64_t sequence = (job_.load(std::memory_order_relaxed) >> kThreadBits) + 1;
  job_.store(sequence << kThreadBits, std::memory_order_release);
  wake_word_.store(static_cast<uint32_t>(sequence), std::memory_order_seq_cst);
  FutexWakeAll(&wake_word_);
  for (std::thread& t : workers_) t.join();
}

IndexRange ThreadPool::StaticRange(int64_t n, int threads, int t) {
  int64_t base = n / threads;
  int64_t extra = n % threads;
  int64_t begin = t * base + std::min<int64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

void ThreadPool::Run(int64_t n, int64_t min_per_thread, RangeFn fn, void* ctx) {
  if (n <= 0) return;
  min_per_thread = std::max<int64_t>(min_per_thread, 1);
  int64_t useful = (n + min_per_thread - 1) / min_per_thread;
  int threads = static_cast<int>(std::min<int64_t>(num_threads_, useful));
  if (tls_in_parallel_body) {
    // A nested call from inside a running body: the current thread already
    // owns its index, so it runs the whole range itself.
    fn(ctx, 0, n, tls_thread_index);
    return;
  }

  std::lock_guard<std::mutex> lock(run_mutex_);
  tls_in_parallel_body = true;
  tls_thread_index = 0;
  if (threads <= 1) {
    fn(ctx, 0, n, 0);
    tls_in_parallel_body = false;
    return;
  }
  if (openmp_parallel_ != nullptr) {
    RunOnOpenMpTeam(n, threads, fn, ctx);
    tls_in_parallel_body = false;
    return;
  }
  job_fn_ = fn;
  job_ctx_ = ctx;
  job_n_ = n;
  pending_.store(static_cast<uint32_t>(threads - 1), std::memory_order_relaxed);
  const uint64_t sequence = (job_.load(std::memory_order_relaxed) >> kThreadBits) + 1;
  job_.store(sequence << kThreadBits | static_cast<uint64_t>(threads), std::memory_order_release);
  // seq_cst store then seq_cst load of sleepers_: pairs with the worker's
  // increment-then-recheck so that no worker sleeps through a job.
  wake_word_.store(static_cast<uint32_t>(sequence), std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&wake_word_);

  IndexRange r = StaticRange(n, threads, 0);
  fn(ctx, r.begin, r.end, 0);
  // Ranges whose worker has not even started (asleep, descheduled on a busy
  // machine) are quicker to run here than to wait for.
  for (int t = 1; t < threads; ++t) {
    if (ClaimRange(t, sequence)) RunRange(t, threads);
  }
  tls_in_parallel_body = false;
  tls_thread_index = 0;

  WaitForWorkers();
}

void ThreadPool::RunOnOpenMpTeam(int64_t n, int threads, RangeFn fn, void* ctx) {
  struct Job {
    RangeFn fn;
    void* ctx;
    int64_t n;
    int threads;
    int (*thread_num)();
    int (*team_size)();
  } job{fn, ctx, n, threads, openmp_thread_num_, openmp_team_size_};
  // The pool's own static split (so results do not depend on which threads
  // ran them), range r run as thread r; a team smaller than asked (an
  // OpenMP thread limit) takes the missing ranges round-robin.
  auto body = [](void* data) {
    const Job& j = *static_cast<const Job*>(data);
    const int t = j.thread_num(), team = std::max(1, j.team_size());
    const bool saved_in_body = tls_in_parallel_body;
    const int saved_index = tls_thread_index;
    tls_in_parallel_body = true;
    for (int r = t; r < j.threads; r += team) {
      tls_thread_index = r;
      const IndexRange range = StaticRange(j.n, j.threads, r);
      if (range.begin < range.end) j.fn(j.ctx, range.begin, range.end, r);
    }
    tls_in_parallel_body = saved_in_body;
    tls_thread_index = saved_index;
  };
  openmp_parallel_(body, &job, static_cast<unsigned>(threads), 0);
}

bool ThreadPool::ClaimRange(int t, uint64_t sequence) {
  // claimed_[t] only grows, and reaches `sequence` once per job: whoever
  // moves it there owns the range. A worker still looking at an older job
  // finds a value >= its sequence and backs off.
  uint64_t last = claimed_[t].load(std::memory_order_relaxed);
  while (last < sequence) {
    if (claimed_[t].compare_exchange_weak(last, sequence, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ThreadPool::RunRange(int t, int threads) {
  const int saved_index = tls_thread_index;
  tls_thread_index = t;
  tls_in_parallel_body = true;
  IndexRange r = StaticRange(job_n_, threads, t);
  job_fn_(job_ctx_, r.begin, r.end, t);
  tls_in_parallel_body = false;
  tls_thread_index = saved_index;
  // The last range wakes a sleeping caller; seq_cst pairs with the caller's
  // flag-then-recheck in WaitForWorkers.
  if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      caller_sleeping_.load(std::memory_order_seq_cst)) {
    FutexWakeAll(&pending_);
  }
}

void ThreadPool::WaitForWorkers() {
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (SpinUntil(done)) return;
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  for (;;) {
    uint32_t left = pending_.load(std::memory_order_seq_cst);
    if (left == 0) break;
    FutexWait(&pending_, left);
  }
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::WorkerLoop(int index) {
  tls_thread_index = index;
  // The word's initial value, not a fresh load: a job posted before this
  // thread got going must still look new.
  uint32_t seen = 0;
  for (;;) {
    auto changed = [&] { return wake_word_.load(std::memory_order_acquire) != seen; };
    if (!SpinUntil(changed)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      for (;;) {
        uint32_t now = wake_word_.load(std::memory_order_seq_cst);
        if (now != seen) break;
        FutexWait(&wake_word_, now);
      }
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    const uint64_t job = job_.load(std::memory_order_acquire);
    const uint64_t sequence = job >> kThreadBits;
    seen = static_cast<uint32_t>(sequence);
    if (stopping_.load(std::memory_order_relaxed)) return;
    const int threads = static_cast<int>(job & kThreadMask);
    // A successful claim means the job is still running (its range `index`
    // is not done), so its fields are still the ones posted with it.
    if (index < threads && ClaimRange(index, sequence)) RunRange(index, threads);
  }
}

ThreadPool& DefaultThreadPool(int threads) {
  if (threads <= 0) threads = GetCpuInfo().physical_cores;
  static std::mutex mutex;
  static auto* pools = new std::map<int, std::unique_ptr<ThreadPool>>();  // lives until exit
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<ThreadPool>& pool = (*pools)[threads];
  if (!pool) pool = std::make_unique<ThreadPool>(threads);
  return *pool;
}

}  // namespace kiln
