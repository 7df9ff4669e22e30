// Host events and the inline stream.
#include "backend/stream.h"

namespace kiln {

uint64_t HostEvent::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++armed_;
}

void HostEvent::Signal(uint64_t generation) {
  // Notified under the lock: a waiter that returns may destroy the event,
  // and cannot return before this releases the lock.
  std::lock_guard<std::mutex> lock(mu_);
  if (generation > signalled_) signalled_ = generation;
  cv_.notify_all();
}

void HostEvent::HostWait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return signalled_ >= armed_; });
}

void InlineStream::Record(Event& event) {
  // Everything enqueued so far has already run.
  if (auto* host = dynamic_cast<HostEvent*>(&event)) {
    host->Signal(host->Arm());
  }
}

InlineStream& HostStream() {
  static InlineStream stream;
  return stream;
}

}  // namespace kiln
