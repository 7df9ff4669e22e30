// Shared server state and the count of requests in flight.
#include "server/server_state.h"

#include <ctime>

namespace kiln::server {

ServerState::ServerState(ServerOptions options)
    : options_(std::move(options)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      waiting_(options_.max_queued_requests) {}

std::shared_ptr<void> ServerState::EnterRequest() {
  {
    std::lock_guard<std::mutex> lock(requests_mu_);
    num_requests_ += 1;
  }
  // The token's deleter is the exit: it runs wherever the last copy dies
  // (a stream's provider outlives its handler).
  return std::shared_ptr<void>(nullptr, [this](void*) {
    {
      std::lock_guard<std::mutex> lock(requests_mu_);
      num_requests_ -= 1;
    }
    requests_done_.notify_all();
  });
}

bool ServerState::WaitForNoRequests(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(requests_mu_);
  return requests_done_.wait_until(lock, deadline, [this] { return num_requests_ == 0; });
}

int64_t ServerState::num_requests() const {
  std::lock_guard<std::mutex> lock(requests_mu_);
  return num_requests_;
}

}  // namespace kiln::server
