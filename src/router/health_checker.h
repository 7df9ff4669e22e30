// Probes every backend's /health on an interval: a backend leaves rotation
// when a probe fails (no answer, or not 200) and comes back when one
// succeeds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "router/backend.h"

namespace kiln::router {

class HealthChecker {
 public:
  // `on_change(index, up)` is called (on the checker's thread) whenever a
  // backend enters or leaves rotation.
  HealthChecker(std::vector<Backend*> backends, std::chrono::milliseconds interval,
                std::function<void(int, bool)> on_change);
  ~HealthChecker();  // stops the thread

  // Probes every backend once, now, on the caller's thread.
  void ProbeAll();
  // Probes every interval on a thread of its own until destroyed.
  void Start();

 private:
  bool Probe(const Backend& backend) const;

  std::vector<Backend*> backends_;
  std::chrono::milliseconds interval_;
  std::function<void(int, bool)> on_change_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::router
