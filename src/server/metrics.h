// The server's Prometheus metrics: responses by status, tokens, latency
// histograms (time to first token, time per output token, end to end), and
// the engine's gauges (running and waiting requests, KV cache use, prefix
// cache hit rate), rendered as the text GET /metrics returns.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/llm_engine.h"
#include "engine/request.h"
#include "server/histogram.h"

namespace kiln::server {

class ServerMetrics {
 public:
  ServerMetrics();

  // Counts one answered HTTP request. Thread-safe.
  void CountResponse(int http_status);

  // Adds a finished engine request (one choice): its tokens, its finish
  // reason and its latencies. Thread-safe.
  void RecordFinished(const RequestStats& stats);

  // Every metric in Prometheus text format; the engine's gauges only when
  // `engine` is not null (before the model is loaded there are none).
  // Thread-safe.
  std::string Render(const EngineCounters* engine) const;

 private:
  mutable std::mutex mu_;
  std::map<int, int64_t> responses_by_status_;
  std::map<std::string, int64_t> finished_by_reason_;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram queue_time_;
};

}  // namespace kiln::server
