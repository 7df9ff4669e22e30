// The worker thread of a stand-in device.
#include "testaccel/worker_stream.h"

namespace kiln {

WorkerStream::WorkerStream(std::chrono::microseconds delay) : delay_(delay), thread_([this] { Loop(); }) {}

WorkerStream::~WorkerStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WorkerStream::set_delay(std::chrono::microseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

uint64_t WorkerStream::Push(Item item) {
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
    position = ++enqueued_;
  }
  cv_.notify_one();
  return position;
}

uint64_t WorkerStream::EnqueueCounted(std::function<void()> work) { return Push({std::move(work), true}); }

uint64_t WorkerStream::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void WorkerStream::Synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  idle_cv_.wait(lock, [&] { return finished_ >= target; });
}

void WorkerStream::Record(Event& event) {
  auto* host = dynamic_cast<HostEvent*>(&event);
  if (host == nullptr) {
    // Another runtime's event: the host stands in for it.
    Synchronize();
    return;
  }
  const uint64_t generation = host->Arm();
  Push({[host, generation] { host->Signal(generation); }, false});
}

void WorkerStream::Wait(Event& event) {
  Push({[&event] { event.HostWait(); }, false});
}

void WorkerStream::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every item has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    const std::chrono::microseconds delay = delay_;
    lock.unlock();
    if (item.delayed && delay.count() > 0) std::this_thread::sleep_for(delay);
    item.work();
    lock.lock();
    ++finished_;
    idle_cv_.notify_all();
  }
}

}  // namespace kiln
