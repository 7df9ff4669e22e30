// `kiln bench serve`: a load generator for any OpenAI-compatible server
// (kiln's own or another). Streams completions over HTTP, closed-loop at
// each concurrency level or with Poisson arrivals at a request rate, and
// reports time to first token, time per output token, end-to-end latency,
// request and token throughput, and errors.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/contention.h"
#include "bench/statistics.h"
#include "core/status.h"

namespace kiln::bench {

struct ServeOptions {
  // http(s)://host:port, optionally with the endpoint's path (default
  // /v1/completions; a path containing "chat" sends chat messages).
  std::string url = "http://127.0.0.1:8000";
  std::string model;  // the request's "model"; empty: the first of /v1/models, else left out
  std::vector<int32_t> concurrency = {1, 4, 16, 64};
  double request_rate = 0;   // requests/s, Poisson arrivals capped by concurrency; 0: closed loop
  int32_t num_prompts = 0;   // requests per level; 0: max(16, 4 x concurrency)
  int32_t input_len = 128;   // words of a random text prompt, or ids of a random id prompt
  int32_t output_len = 128;  // max_tokens
  bool prompt_ids = false;   // send random token ids instead of text (for models without a tokenizer)
  int32_t max_token_id = 10000;
  std::string prompts_file;  // prompts, one per line (or JSON Lines with "prompt"), used in turn
  uint64_t seed = 0;
  bool ignore_eos = true;    // sent as "ignore_eos" (vLLM and kiln honour it; others ignore it)
  double temperature = 0;
  std::string api_key;       // sent as a bearer token when set
  double timeout_seconds = 600;
  ContentionOptions contention;
};

// One request's outcome, seconds from when it was sent.
struct RequestRecord {
  bool ok = false;
  std::string error;
  double ttft = 0;
  double e2e = 0;
  int64_t prompt_tokens = -1;  // from the server's usage, -1 when not reported
  int64_t output_tokens = 0;   // usage's completion_tokens, else the chunks with text
  std::vector<double> itl;     // between consecutive chunks with text
};

struct ServeLevel {
  int32_t concurrency = 0;
  double request_rate = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;  // prompt + output, when the server reports prompt tokens
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool prompt_tokens_known = false;
  Summary ttft_s, tpot_s, itl_s, e2e_s;
  std::vector<std::string> errors;  // distinct messages, a few at most
  ContentionReading contention;
};

struct ServeReport {
  ServeOptions options;
  std::string endpoint;  // the full URL requests went to
  std::string model;
  std::vector<ServeLevel> levels;
};

struct ServeProgress {
  int32_t concurrency = 0;
  int64_t done = 0;
  int64_t total = 0;
};

// Runs every concurrency level in turn. Fails only on bad options or a URL
// that cannot be parsed; request failures are counted, with messages.
Expected<ServeReport> RunServeBenchmark(const ServeOptions& options,
                                        const std::function<void(const ServeProgress&)>& on_progress = {});

// Splits "http://host:port/path" into "http://host:port" and "/path" ("" when
// absent). Only http and https.
struct HttpUrl {
  std::string origin;
  std::string path;
};
Expected<HttpUrl> ParseHttpUrl(std::string_view url);

// Reads one streamed response's events (the data of each server-sent event)
// as they arrive at `now` seconds from the request's start.
class StreamedCompletion {
 public:
  // Returns false when the stream should be dropped (an error event).
  bool OnEvent(const std::string& data, double now);
  // The record once the response is complete (`now`: when it ended).
  // `http_status` and `failure` (a transport error or the start of an error
  // response's body, "" when none) decide whether it failed.
  RequestRecord Finish(double now, int http_status, const std::string& failure) const;

 private:
  bool saw_done_ = false;
  bool saw_text_ = false;
  double first_text_ = 0;
  double last_text_ = 0;
  int64_t chunks_with_text_ = 0;
  int64_t usage_prompt_ = -1;
  int64_t usage_completion_ = -1;
  std::vector<double> itl_;
  std::string error_;
};

std::string FormatServeTable(const ServeReport& report);
nlohmann::ordered_json ServeJson(const ServeReport& report);

}  // namespace kiln::bench
