// What the endpoints share: the options, the served model's name, the
// engine once it is loaded, the metrics, the waiting-request bound, and
// the bookkeeping of a graceful shutdown (draining, requests in flight).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/server_options.h"
#include "server/waiting_limit.h"

namespace kiln::server {

class ServerState {
 public:
  // REQUIRES: options.Validate() is ok and served_model_name is set.
  explicit ServerState(ServerOptions options);

  const ServerOptions& options() const { return options_; }
  const std::string& model_name() const { return options_.served_model_name; }
  // Unix time the server started, the "created" of GET /v1/models.
  int64_t created() const { return created_; }

  // The engine loop; null until the model is loaded. Thread-safe.
  EngineLoop* engine_loop() const { return engine_loop_.load(); }
  // REQUIRES: `loop` outlives every request served.
  void set_engine_loop(EngineLoop* loop) { engine_loop_.store(loop); }

  ServerMetrics& metrics() { return metrics_; }
  WaitingLimit& waiting() { return waiting_; }

  // True once shutdown has begun: new generation requests are refused.
  bool draining() const { return draining_.load(); }
  void set_draining() { draining_.store(true); }

  // Marks a generation request in flight until the returned token is
  // dropped (after its response's last byte). Thread-safe.
  std::shared_ptr<void> EnterRequest();
  // Waits until no request is in flight or `deadline` passes; true when
  // none is. Thread-safe.
  bool WaitForNoRequests(std::chrono::steady_clock::time_point deadline);
  int64_t num_requests() const;

 private:
  ServerOptions options_;
  int64_t created_;
  std::atomic<EngineLoop*> engine_loop_{nullptr};
  ServerMetrics metrics_;
  WaitingLimit waiting_;
  std::atomic<bool> draining_{false};
  mutable std::mutex requests_mu_;
  std::condition_variable requests_done_;
  int64_t num_requests_ = 0;
};

}  // namespace kiln::server
