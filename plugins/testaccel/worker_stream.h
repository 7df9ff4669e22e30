// A stream that runs its work on a thread of its own, as a device's queue
// does: Enqueue returns at once, and each kernel or copy starts only after
// a small delay, so that a host that reads without synchronizing reads
// before the device has written.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/stream.h"

namespace kiln {

class WorkerStream : public Stream {
 public:
  explicit WorkerStream(std::chrono::microseconds delay);
  // Finishes the queued work, then joins the thread.
  ~WorkerStream() override;
  WorkerStream(const WorkerStream&) = delete;
  WorkerStream& operator=(const WorkerStream&) = delete;

  bool is_inline() const override { return false; }
  void Enqueue(std::function<void()> work) override { (void)EnqueueCounted(std::move(work)); }
  // Enqueue that returns the work's position in the stream: it has run
  // once finished() reaches it.
  uint64_t EnqueueCounted(std::function<void()> work);
  uint64_t finished();
  void Synchronize() override;
  void Record(Event& event) override;
  void Wait(Event& event) override;

  // The delay before each kernel or copy.
  void set_delay(std::chrono::microseconds delay);

 private:
  struct Item {
    std::function<void()> work;
    bool delayed = true;  // kernels and copies; not event signals and waits
  };
  uint64_t Push(Item item);
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;       // work queued, or stopping
  std::condition_variable idle_cv_;  // an item finished
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;
  uint64_t finished_ = 0;
  bool stop_ = false;
  std::chrono::microseconds delay_;
  std::thread thread_;
};

}  // namespace kiln
