// Lock-free admission against the waiting-request bound.
#include "server/waiting_limit.h"

namespace kiln::server {

bool WaitingLimit::TryAcquire(int n) {
  int current = count_.load();
  do {
    if (current + n > limit_) return false;
  } while (!count_.compare_exchange_weak(current, current + n));
  return true;
}

void WaitingLimit::Release(int n) { count_.fetch_sub(n); }

}  // namespace kiln::server
