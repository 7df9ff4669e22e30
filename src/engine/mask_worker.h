// A thread of its own that runs one task at a time beside the caller: the
// grammar masks of a step are computed on it while the forward pass runs.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln {

class MaskWorker {
 public:
  MaskWorker();
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Starts `task` on the worker. REQUIRES: no task is running (Wait() was
  // called after the last Start()).
  void Start(std::function<void()> task);
  // Blocks until the task started last has returned; returns at once when
  // none was started.
  void Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: it starts after the fields it reads
};

}  // namespace kiln
