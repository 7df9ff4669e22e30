// The probing loop.
#include "router/health_checker.h"

#include <algorithm>

namespace kiln::router {

HealthChecker::HealthChecker(std::vector<Backend*> backends, std::chrono::milliseconds interval,
                             std::function<void(int, bool)> on_change)
    : backends_(std::move(backends)), interval_(interval), on_change_(std::move(on_change)) {}

HealthChecker::~HealthChecker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool HealthChecker::Probe(const Backend& backend) const {
  // A probe that takes longer than the interval (but at least a second)
  // counts as failed.
  const auto limit = std::max<std::chrono::milliseconds>(interval_, std::chrono::seconds(1));
  httplib::Client client(backend.address().host, backend.address().port);
  client.set_connection_timeout(limit);
  client.set_read_timeout(limit);
  client.set_write_timeout(limit);
  httplib::Result result = client.Get("/health");
  return result && result->status == 200;
}

void HealthChecker::ProbeAll() {
  for (size_t i = 0; i < backends_.size(); ++i) {
    const bool up = Probe(*backends_[i]);
    if (backends_[i]->SetUp(up) && on_change_) on_change_(static_cast<int>(i), up);
  }
}

void HealthChecker::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      ProbeAll();
      lock.lock();
    }
  });
}

}  // namespace kiln::router
