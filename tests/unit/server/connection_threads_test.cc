// The connection task queue: a thread per concurrent task up to the limit,
// queuing beyond it, idle threads ending, and shutdown running what is
// queued.
#include "server/connection_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace kiln::server {
namespace connection_threads_tests {

// Tasks that block until released, counting how many run at once.
class Gate {
 public:
  std::function<void()> Task() {
    return [this] {
      std::unique_lock<std::mutex> lock(mu_);
      running_ += 1;
      peak_ = std::max(peak_, running_);
      changed_.notify_all();
      changed_.wait(lock, [this] { return open_; });
      running_ -= 1;
      finished_ += 1;
      changed_.notify_all();
    };
  }
  void WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return running_ >= n; });
  }
  void WaitFinished(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return finished_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  int running() {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }
  int peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  int running_ = 0, peak_ = 0, finished_ = 0;
};

TEST(ConnectionThreadsTest, EveryTaskGetsAThreadUpToTheLimit) {
  ConnectionThreads threads(300);
  Gate gate;
  for (int i = 0; i < 200; ++i) threads.enqueue(gate.Task());
  gate.WaitRunning(200);  // all at once: no task waits behind another
  EXPECT_EQ(threads.num_threads(), 200);
  gate.Open();
  gate.WaitFinished(200);
  threads.shutdown();
  EXPECT_EQ(threads.num_threads(), 0);
}

TEST(ConnectionThreadsTest, BeyondTheLimitTasksWaitTheirTurn) {
  ConnectionThreads threads(4);
  Gate gate;
  for (int i = 0; i < 10; ++i) threads.enqueue(gate.Task());
  gate.WaitRunning(4);
  EXPECT_EQ(threads.peak_threads(), 4);
  gate.Open();
  gate.WaitFinished(10);
  EXPECT_EQ(gate.peak(), 4);
  threads.shutdown();
}

TEST(ConnectionThreadsTest, IdleThreadsAreReusedAndEnd) {
  ConnectionThreads threads(8, std::chrono::milliseconds(50));
  std::atomic<int> done{0};
  for (int round = 0; round < 5; ++round) {
    threads.enqueue([&] { done += 1; });
    while (done < round + 1) std::this_thread::yield();
  }
  EXPECT_LE(threads.peak_threads(), 2);
  // After the idle timeout the threads leave on their own.
  for (int i = 0; i < 200 && threads.num_threads() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(threads.num_threads(), 0);
  threads.enqueue([&] { done += 1; });  // and new ones start when needed
  while (done < 6) std::this_thread::yield();
  threads.shutdown();
}

TEST(ConnectionThreadsTest, ShutdownRunsQueuedTasksThenJoins) {
  ConnectionThreads threads(1);
  Gate gate;
  std::atomic<int> after{0};
  threads.enqueue(gate.Task());
  gate.WaitRunning(1);
  for (int i = 0; i < 5; ++i) threads.enqueue([&] { after += 1; });
  std::thread closer([&] { threads.shutdown(); });
  gate.Open();
  closer.join();
  EXPECT_EQ(after.load(), 5);
  threads.enqueue([&] { after += 1; });  // ignored once shut down
  EXPECT_EQ(after.load(), 5);
}

}  // namespace connection_threads_tests
}  // namespace kiln::server
