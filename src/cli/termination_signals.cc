#include "cli/termination_signals.h"

#include <signal.h>

namespace kiln {

namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

TerminationSignalWatcher::TerminationSignalWatcher(std::function<void(const char*)> on_signal)
    : on_signal_(std::move(on_signal)) {
  thread_ = std::thread([this] { Run(); });
}

TerminationSignalWatcher::~TerminationSignalWatcher() {
  done_ = true;
  thread_.join();
}

void TerminationSignalWatcher::Run() {
  const sigset_t set = TerminationSet();
  // Polled so that the destructor's done_ is seen.
  const timespec poll_interval{0, 200 * 1000 * 1000};
  while (!done_) {
    int sig = sigtimedwait(&set, nullptr, &poll_interval);
    if (sig <= 0) continue;
    on_signal_(sig == SIGTERM ? "SIGTERM" : "SIGINT");
  }
}

}  // namespace kiln
