// The router's own Prometheus metrics: answers to clients by status,
// backend attempts by backend and outcome, retries, how replicas were
// picked (prefix affinity or load), client disconnects, streams cut by a
// backend failure, requests in flight and backends up, and end-to-end
// latency.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "router/replica_picker.h"
#include "server/histogram.h"

namespace kiln::router {

class Backend;

class RouterMetrics {
 public:
  RouterMetrics();

  // All thread-safe.
  void CountResponse(int http_status, double seconds);
  // One try on a backend: its HTTP status, or "error" when it gave none.
  void CountAttempt(const std::string& backend_url, const std::string& outcome);
  void CountRetry();
  void CountPick(PickReason reason);
  void CountClientDisconnect();
  void CountStreamError();
  void CountBackendDown(const std::string& backend_url);
  // Prefill/decode mode: a request's outcome ("decoded": its prefill
  // landed and the decode instance was asked; "prefill_failed").
  void CountDisaggregated(const std::string& outcome);

  std::string Render(const std::vector<const Backend*>& backends) const;

 private:
  mutable std::mutex mu_;
  std::map<int, int64_t> responses_by_status_;
  std::map<std::pair<std::string, std::string>, int64_t> attempts_;
  std::map<std::string, int64_t> down_transitions_;
  std::map<std::string, int64_t> disaggregated_;
  int64_t retries_ = 0;
  int64_t affinity_picks_ = 0;
  int64_t load_balanced_picks_ = 0;
  int64_t client_disconnects_ = 0;
  int64_t stream_errors_ = 0;
  server::Histogram latency_;
};

}  // namespace kiln::router
