// The HTTP library's task queue: one thread per open connection, started
// when a connection arrives and no idle thread is free, up to a limit.
// A stream holds its thread for as long as it runs, so a fixed small pool
// would make the hundredth stream wait for the first to end; threads grow
// with demand instead, and shrink back after idling.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::server {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  // At most `max_threads` connections are served at once; more wait in
  // arrival order. Threads idle for `idle_timeout` end.
  explicit ConnectionThreads(int max_threads,
                             std::chrono::milliseconds idle_timeout = std::chrono::seconds(30));
  ~ConnectionThreads() override;

  // Runs `fn` on an idle thread, a new one, or (at the limit) the first
  // thread to come free. Thread-safe.
  void enqueue(std::function<void()> fn) override;

  // Runs every queued task, then joins every thread. Enqueueing afterwards
  // is ignored.
  void shutdown() override;

  // Threads alive now and the most ever alive at once. Thread-safe.
  int num_threads() const;
  int peak_threads() const;

 private:
  struct Worker {
    std::thread thread;
    bool exited = false;
  };
  void Work(Worker* self);
  // Joins workers that ended by idling. REQUIRES: mu_ held.
  void ReapExited();

  const int max_threads_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex mu_;
  std::condition_variable has_task_;
  std::deque<std::function<void()>> tasks_;
  std::list<Worker> workers_;  // stable addresses for the workers' own flags
  int idle_ = 0;
  int alive_ = 0;
  int peak_ = 0;
  bool shutting_down_ = false;
};

}  // namespace kiln::server
