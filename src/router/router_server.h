// `kiln router`: one OpenAI-compatible endpoint in front of several
// `kiln serve` replicas. Requests are passed through unchanged; each goes
// to the replica holding its longest known prompt prefix (so its prefix
// cache hits) unless that replica is busier than the least loaded one by
// more than a margin, and then to the least loaded. Streams are relayed
// event by event. A request whose backend fails before its first byte is
// sent to another replica; a client that goes away has its backend
// connection closed, which aborts the backend's request.
//
//   GET  /health               200 while at least one backend is up, else 503
//   GET  /metrics              the router's own Prometheus text
//   GET  /v1/models            from an up backend
//   POST /v1/completions, /v1/chat/completions   routed by prefix and load
//   POST /tokenize, /detokenize                  routed by load
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "router/affinity_text.h"
#include "router/backend.h"
#include "router/health_checker.h"
#include "router/prefix_affinity.h"
#include "router/replica_picker.h"
#include "router/router_metrics.h"
#include "router/router_options.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace kiln::server {
class HttpListener;
}

namespace kiln::router {

class RouterServer {
 public:
  // REQUIRES: options.Validate() is ok.
  explicit RouterServer(RouterOptions options);
  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Binds host:port (0: a free one). The error names the address.
  Status Bind();
  int port() const { return bound_port_; }

  // Probes the backends once, starts the health checks, and serves until
  // Shutdown(); returns once every connection has closed.
  void Serve();

  // Stops accepting, lets requests in flight finish for up to
  // `timeout_seconds`, then closes idle connections. Thread-safe.
  void Shutdown(double timeout_seconds);

  // Backends up now.
  int backends_up() const;

 private:
  void InstallRoutes();
  // Forwards one request, picking (and on failure re-picking) a backend.
  // `affinity_text` empty: by load alone.
  // `excluded`: backends not to pick (empty: none).
  void Forward(const httplib::Request& req, httplib::Response& res, const std::string& affinity_text,
               std::vector<bool> excluded = {});
  // Prefill/decode mode: runs the prompt on the least loaded prefill
  // instance, waits until it says its KV blocks landed at its decode
  // instance, then forwards the request to that decode instance.
  void ForwardDisaggregated(const httplib::Request& req, httplib::Response& res);
  // Picks a backend for a request with these prefix hashes, not one of
  // `tried`; records the prefix as that backend's.
  ReplicaPick Pick(const std::vector<uint64_t>& hashes, const std::vector<bool>& tried);
  void OnHealthChange(int index, bool up);

  const RouterOptions options_;
  // The replicas; in prefill/decode mode the prefill instances, then the
  // decode instances.
  std::vector<std::unique_ptr<Backend>> backends_;
  size_t num_prefill_ = 0;
  std::unique_ptr<server::HttpListener> http_;
  std::unique_ptr<HealthChecker> health_;
  RouterMetrics metrics_;
  std::mutex affinity_mu_;
  PrefixAffinityMap affinity_;
  std::atomic<size_t> rotation_{0};
  std::atomic<int> requests_in_flight_{0};
  std::atomic<bool> draining_{false};
  // Set when the shutdown timeout has passed: streams still running end.
  std::atomic<bool> abort_streams_{false};
  int bound_port_ = -1;
  std::once_flag shutdown_once_;
};

}  // namespace kiln::router
