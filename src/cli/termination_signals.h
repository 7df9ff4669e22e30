// SIGTERM and SIGINT for the long-running commands (serve, router): blocked
// in every thread, and waited for by one watcher thread that starts the
// shutdown on the first.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace kiln {

// Blocks SIGTERM and SIGINT in the calling thread, so that every thread it
// starts afterwards inherits the mask and only the watcher sees them.
void BlockTerminationSignals();

class TerminationSignalWatcher {
 public:
  // `on_signal` runs on the watcher's thread with "SIGTERM" or "SIGINT".
  explicit TerminationSignalWatcher(std::function<void(const char* signal)> on_signal);
  ~TerminationSignalWatcher();

 private:
  void Run();

  std::function<void(const char*)> on_signal_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace kiln
