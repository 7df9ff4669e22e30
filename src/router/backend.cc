// The backend's connection pool.
#include "router/backend.h"

namespace kiln::router {
namespace {

// Idle connections kept per backend; more are closed when returned.
constexpr size_t kMaxIdleConnections = 64;
constexpr int kConnectTimeoutSeconds = 2;
constexpr int kWriteTimeoutSeconds = 30;

}  // namespace

Backend::Backend(BackendAddress address, int read_timeout_seconds)
    : address_(std::move(address)), read_timeout_seconds_(read_timeout_seconds) {}

std::unique_ptr<httplib::Client> Backend::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<httplib::Client> client = std::move(idle_.back());
      idle_.pop_back();
      return client;
    }
  }
  auto client = std::make_unique<httplib::Client>(address_.host, address_.port);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(kConnectTimeoutSeconds, 0);
  client->set_read_timeout(read_timeout_seconds_, 0);
  client->set_write_timeout(kWriteTimeoutSeconds, 0);
  return client;
}

void Backend::Release(std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(client));
}

}  // namespace kiln::router
