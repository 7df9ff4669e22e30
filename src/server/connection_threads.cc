// A task queue whose threads grow with open connections up to a limit.
#include "server/connection_threads.h"

namespace kiln::server {

ConnectionThreads::ConnectionThreads(int max_threads, std::chrono::milliseconds idle_timeout)
    : max_threads_(max_threads < 1 ? 1 : max_threads), idle_timeout_(idle_timeout) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (shutting_down_) return;
  ReapExited();
  tasks_.push_back(std::move(fn));
  // Idle threads already waiting will take queued tasks; start a thread
  // only for tasks no idle thread is left for.
  if (static_cast<int>(tasks_.size()) > idle_ && alive_ < max_threads_) {
    Worker& worker = workers_.emplace_back();
    alive_ += 1;
    peak_ = std::max(peak_, alive_);
    worker.thread = std::thread([this, &worker] { Work(&worker); });
  }
  lock.unlock();
  has_task_.notify_one();
}

void ConnectionThreads::Work(Worker* self) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    idle_ += 1;
    bool woke = has_task_.wait_for(lock, idle_timeout_, [this] { return !tasks_.empty() || shutting_down_; });
    idle_ -= 1;
    if (!woke || tasks_.empty()) break;  // idled out, or shutting down with nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // release what the task held before taking the lock again
    lock.lock();
  }
  alive_ -= 1;
  self->exited = true;
}

void ConnectionThreads::ReapExited() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->exited) {
      it->thread.join();  // it has left Work(); joining waits only for its last instructions
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void ConnectionThreads::shutdown() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_ && workers_.empty()) return;
    shutting_down_ = true;
  }
  has_task_.notify_all();
  // Workers finish the queued tasks before they see the flag and leave;
  // join them outside the lock, which they need to leave.
  std::unique_lock<std::mutex> lock(mu_);
  workers.splice(workers.end(), workers_);
  lock.unlock();
  for (Worker& w : workers) w.thread.join();
}

int ConnectionThreads::num_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return alive_;
}

int ConnectionThreads::peak_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace kiln::server
