// The bound on generation requests accepted but not yet started: past it,
// new requests are refused (503 with Retry-After) rather than queued
// without limit.
#pragma once

#include <atomic>

namespace kiln::server {

class WaitingLimit {
 public:
  explicit WaitingLimit(int limit) : limit_(limit) {}

  // Takes `n` places if that many are free, all or none. Thread-safe.
  bool TryAcquire(int n);
  // Gives back `n` places. Thread-safe.
  void Release(int n = 1);

  // Places taken now. Thread-safe.
  int count() const { return count_.load(); }
  int limit() const { return limit_; }

 private:
  const int limit_;
  std::atomic<int> count_{0};
};

}  // namespace kiln::server
