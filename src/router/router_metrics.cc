// The router's counters and gauges in Prometheus text format.
#include "router/router_metrics.h"

#include <fmt/format.h>

#include "router/backend.h"

namespace kiln::router {
namespace {

std::vector<double> LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25,  0.5,  0.75,
          1.0,   2.5,    5.0,   7.5,  10.0,  20.0, 40.0,  80.0, 160.0, 640.0};
}

std::string Header(const char* name, const char* type, const char* help) {
  return fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

RouterMetrics::RouterMetrics() : latency_(LatencyBounds()) {}

void RouterMetrics::CountResponse(int http_status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  responses_by_status_[http_status] += 1;
  latency_.Observe(seconds);
}

void RouterMetrics::CountAttempt(const std::string& backend_url, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  attempts_[{backend_url, outcome}] += 1;
}

void RouterMetrics::CountRetry() {
  std::lock_guard<std::mutex> lock(mu_);
  retries_ += 1;
}

void RouterMetrics::CountPick(PickReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason == PickReason::kPrefixAffinity) affinity_picks_ += 1;
  if (reason == PickReason::kLeastLoaded) load_balanced_picks_ += 1;
}

void RouterMetrics::CountClientDisconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  client_disconnects_ += 1;
}

void RouterMetrics::CountStreamError() {
  std::lock_guard<std::mutex> lock(mu_);
  stream_errors_ += 1;
}

void RouterMetrics::CountDisaggregated(const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  disaggregated_[outcome] += 1;
}

void RouterMetrics::CountBackendDown(const std::string& backend_url) {
  std::lock_guard<std::mutex> lock(mu_);
  down_transitions_[backend_url] += 1;
}

std::string RouterMetrics::Render(const std::vector<const Backend*>& backends) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  out += Header("kiln_router_requests_total", "counter", "Requests answered by the router, by status code.");
  for (const auto& [status, count] : responses_by_status_) {
    out += fmt::format("kiln_router_requests_total{{status=\"{}\"}} {}\n", status, count);
  }
  out += Header("kiln_router_backend_requests_total", "counter",
                "Requests sent to each backend, by the backend's status code (\"error\": no response).");
  for (const auto& [key, count] : attempts_) {
    out += fmt::format("kiln_router_backend_requests_total{{backend=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, count);
  }
  out += Header("kiln_router_retries_total", "counter",
                "Requests sent again to another backend after one failed before its first byte.");
  out += fmt::format("kiln_router_retries_total {}\n", retries_);
  out += Header("kiln_router_prefix_affinity_picks_total", "counter",
                "Backends picked because they hold the request's longest known prompt prefix.");
  out += fmt::format("kiln_router_prefix_affinity_picks_total {}\n", affinity_picks_);
  out += Header("kiln_router_load_balanced_picks_total", "counter",
                "Backends picked as the least loaded (no known prefix, or its backend was too busy).");
  out += fmt::format("kiln_router_load_balanced_picks_total {}\n", load_balanced_picks_);
  out +=
      Header("kiln_router_client_disconnects_total", "counter",
             "Requests whose client went away before the answer ended (the backend's request was closed).");
  out += fmt::format("kiln_router_client_disconnects_total {}\n", client_disconnects_);
  out += Header("kiln_router_stream_errors_total", "counter",
                "Streams ended with an error event because their backend failed after the first byte.");
  out += fmt::format("kiln_router_stream_errors_total {}\n", stream_errors_);
  out += Header("kiln_router_pd_requests_total", "counter",
                "Prefill/decode requests by outcome: decoded (the KV landed; the decode instance was asked), "
                "prefill_failed.");
  for (const char* outcome : {"decoded", "prefill_failed"}) {
    auto it = disaggregated_.find(outcome);
    out += fmt::format("kiln_router_pd_requests_total{{outcome=\"{}\"}} {}\n", outcome,
                       it == disaggregated_.end() ? 0 : it->second);
  }
  out += Header("kiln_router_backend_down_total", "counter", "Times each backend was taken out of rotation.");
  for (const Backend* b : backends) {
    auto it = down_transitions_.find(b->url());
    out += fmt::format("kiln_router_backend_down_total{{backend=\"{}\"}} {}\n", b->url(),
                       it == down_transitions_.end() ? 0 : it->second);
  }
  out += Header("kiln_router_backend_up", "gauge", "1 while the backend is in rotation.");
  for (const Backend* b : backends) {
    out += fmt::format("kiln_router_backend_up{{backend=\"{}\"}} {}\n", b->url(), b->up() ? 1 : 0);
  }
  out +=
      Header("kiln_router_backend_in_flight", "gauge", "Requests in flight through the router, per backend.");
  int total = 0;
  for (const Backend* b : backends) {
    out += fmt::format("kiln_router_backend_in_flight{{backend=\"{}\"}} {}\n", b->url(), b->in_flight());
    total += b->in_flight();
  }
  out += Header("kiln_router_in_flight", "gauge", "Requests in flight through the router.");
  out += fmt::format("kiln_router_in_flight {}\n", total);
  out += latency_.Render("kiln_router_request_duration_seconds",
                         "Time from a request's arrival to the end of its answer.");
  return out;
}

}  // namespace kiln::router
