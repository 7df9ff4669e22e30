// One backend (a `kiln serve` replica) as the router sees it: its address,
// a pool of kept-alive HTTP connections to it, whether it is in rotation,
// and how many requests the router has in flight on it.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "router/router_options.h"

namespace kiln::router {

class Backend {
 public:
  Backend(BackendAddress address, int read_timeout_seconds);

  const BackendAddress& address() const { return address_; }
  const std::string& url() const { return address_.url; }

  // An idle kept-alive connection to the backend, or a new one. Thread-safe.
  std::unique_ptr<httplib::Client> Acquire();
  // Returns a connection whose exchange completed, to be reused. Thread-safe.
  void Release(std::unique_ptr<httplib::Client> client);

  bool up() const { return up_.load(); }
  // True when this changed whether the backend is in rotation.
  bool SetUp(bool up) { return up_.exchange(up) != up; }

  int in_flight() const { return in_flight_.load(); }
  void AddInFlight(int delta) { in_flight_ += delta; }

 private:
  const BackendAddress address_;
  const int read_timeout_seconds_;
  std::atomic<bool> up_{false};
  std::atomic<int> in_flight_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;
};

// Counts a request in flight on a backend for as long as it lives.
class InFlight {
 public:
  explicit InFlight(Backend& backend) : backend_(backend) { backend_.AddInFlight(1); }
  ~InFlight() { backend_.AddInFlight(-1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  Backend& backend_;
};

}  // namespace kiln::router
