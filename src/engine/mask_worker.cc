// MaskWorker: one thread, one task at a time.
#include "engine/mask_worker.h"

#include <utility>

namespace kiln {

MaskWorker::MaskWorker() : thread_([this] { Loop(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::Start(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = std::move(task);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskWorker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void MaskWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || (busy_ && task_); });
    if (stop_) return;
    std::function<void()> task = std::move(task_);
    task_ = nullptr;
    lock.unlock();
    task();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace kiln
