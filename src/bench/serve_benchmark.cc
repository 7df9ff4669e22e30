// The HTTP load generator: one client thread per concurrent request.
#include "bench/serve_benchmark.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "bench/sse_reader.h"
#include "bench/text_table.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Lines of an event stream longer than this end the request (a broken server).
constexpr size_t kMaxLineBytes = 16 << 20;
// Error messages kept per level.
constexpr size_t kMaxErrors = 5;

// Words of the random text prompts: common English, mostly one token each
// in any BPE vocabulary.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",
    "with",  "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",
    "at",    "which", "but",   "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",
    "all",   "we",    "can",   "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",
    "would", "who",   "so",    "no",    "time",  "water", "house", "light", "river", "stone", "green",
    "small", "north", "music", "paper", "story", "world", "table", "city",  "bread"};

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The prompts of one level: from the file in turn, or random.
struct PromptSource {
  std::vector<std::string> file_prompts;

  nlohmann::json Make(const ServeOptions& o, std::mt19937_64& rng, int64_t index) const {
    if (!file_prompts.empty()) return file_prompts[static_cast<size_t>(index) % file_prompts.size()];
    if (o.prompt_ids) {
      std::vector<int32_t> ids(static_cast<size_t>(o.input_len));
      for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(std::max(1, o.max_token_id)));
      return ids;
    }
    std::string text;
    for (int32_t i = 0; i < o.input_len; ++i) {
      if (i > 0) text += ' ';
      text += kWords[rng() % std::size(kWords)];
    }
    return text;
  }
};

Expected<std::vector<std::string>> ReadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("{}: cannot open the prompts file", path);
  std::vector<std::string> prompts;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.front() == '{') {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
        return InvalidArgument("{}: line {}: a JSON line needs a string \"prompt\"", path, line_number);
      }
      prompts.push_back(j["prompt"].get<std::string>());
    } else {
      prompts.push_back(line);
    }
  }
  if (prompts.empty()) return InvalidArgument("{}: no prompts", path);
  return prompts;
}

std::string DiscoverModel(httplib::Client& client, const ServeOptions& o) {
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  auto res = client.Get("/v1/models", headers);
  if (!res || res->status != 200) return "";
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) return "";
  const nlohmann::json& first = j["data"][0];
  return first.is_object() && first.contains("id") && first["id"].is_string() ? first["id"].get<std::string>() : "";
}

std::string RequestBody(const ServeOptions& o, const std::string& model, bool chat, const nlohmann::json& prompt) {
  nlohmann::ordered_json body;
  if (!model.empty()) body["model"] = model;
  if (chat) {
    const std::string text = prompt.is_string() ? prompt.get<std::string>() : prompt.dump();
    body["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}});
  } else {
    body["prompt"] = prompt;
  }
  body["max_tokens"] = o.output_len;
  body["temperature"] = o.temperature;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

// Sends one request on `client` and times its stream.
RequestRecord SendOne(httplib::Client& client, const ServeOptions& o, const std::string& path, const std::string& body) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  if (!o.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + o.api_key);
  req.body = body;

  const Clock::time_point start = Clock::now();
  StreamedCompletion stream;
  SseReader reader;
  int status = 0;
  std::string error_body;
  bool dropped = false;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 300) error_body.append(data, std::min<size_t>(length, 300 - error_body.size()));
      return true;
    }
    const double now = Since(start);
    bool keep = true;
    reader.Feed(std::string_view(data, length), [&](const std::string& event) {
      keep = keep && stream.OnEvent(event, now);
    });
    if (reader.pending_bytes() > kMaxLineBytes) keep = false;
    dropped = dropped || !keep;
    return keep;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  std::string failure;
  if (!sent && !dropped) failure = fmt::format("HTTP transport: {}", httplib::to_string(error));
  if (status != 200 && status != 0) {
    std::string snippet = error_body.empty() ? res.body.substr(0, 300) : error_body;
    std::replace(snippet.begin(), snippet.end(), '\n', ' ');
    failure = fmt::format("HTTP {}: {}", status, snippet);
  }
  return stream.Finish(Since(start), status, failure);
}

// Runs one level: `n` requests, at most `concurrency` in flight.
ServeLevel RunLevel(const ServeOptions& o, const HttpUrl& url, const std::string& model, bool chat,
                    int32_t concurrency, int64_t n, const PromptSource& prompts, ContentionSampler& sampler,
                    const std::function<void(const ServeProgress&)>& on_progress) {
  // Bodies and arrival times are drawn up front so that the level's load
  // does not depend on thread timing.
  std::mt19937_64 rng(o.seed + static_cast<uint64_t>(concurrency));
  std::vector<std::string> bodies;
  std::vector<double> arrivals(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) bodies.push_back(RequestBody(o, model, chat, prompts.Make(o, rng, i)));
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (double& a : arrivals) {
      t += gap(rng);
      a = t;
    }
  }

  std::vector<RequestRecord> records(static_cast<size_t>(n));
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex progress_mu;
  const ContentionSampler::Point measured_from = sampler.Now();
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int32_t w = 0; w < std::min<int64_t>(concurrency, n); ++w) {
    workers.emplace_back([&] {
      httplib::Client client(url.origin);
      client.set_keep_alive(true);
      client.set_connection_timeout(10);
      client.set_read_timeout(static_cast<time_t>(o.timeout_seconds));
      client.set_write_timeout(static_cast<time_t>(o.timeout_seconds));
      for (int64_t i = next++; i < n; i = next++) {
        const auto arrival = start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(arrivals[static_cast<size_t>(i)]));
        std::this_thread::sleep_until(arrival);
        records[static_cast<size_t>(i)] = SendOne(client, o, url.path, bodies[static_cast<size_t>(i)]);
        const int64_t finished = ++done;
        if (on_progress) {
          std::lock_guard<std::mutex> lock(progress_mu);
          on_progress({concurrency, finished, n});
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();

  ServeLevel level;
  level.duration_s = Since(start);
  level.contention = sampler.Since(measured_from);
  level.concurrency = concurrency;
  level.request_rate = o.request_rate;
  std::vector<double> ttft, tpot, itl, e2e;
  level.prompt_tokens_known = true;
  std::set<std::string> errors;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++level.failed;
      if (errors.size() < kMaxErrors) errors.insert(r.error);
      continue;
    }
    ++level.completed;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / static_cast<double>(r.output_tokens - 1));
    level.output_tokens += r.output_tokens;
    if (r.prompt_tokens >= 0) {
      level.prompt_tokens += r.prompt_tokens;
    } else {
      level.prompt_tokens_known = false;
    }
  }
  level.errors.assign(errors.begin(), errors.end());
  if (level.completed == 0) level.prompt_tokens_known = false;
  level.ttft_s = Summarize(ttft);
  level.tpot_s = Summarize(tpot);
  level.itl_s = Summarize(itl);
  level.e2e_s = Summarize(e2e);
  if (level.duration_s > 0) {
    level.requests_per_s = static_cast<double>(level.completed) / level.duration_s;
    level.output_tokens_per_s = static_cast<double>(level.output_tokens) / level.duration_s;
    if (level.prompt_tokens_known) {
      level.total_tokens_per_s = static_cast<double>(level.prompt_tokens + level.output_tokens) / level.duration_s;
    }
  }
  return level;
}

std::string Ms(double s) {
  return s > 0 ? fmt::format("{:.1f}", s * 1e3) : "-";
}

}  // namespace

Expected<HttpUrl> ParseHttpUrl(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return InvalidArgument("URL '{}': expected http://host:port", url);
  std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return InvalidArgument("URL '{}': only http and https", url);
  std::string_view rest = url.substr(scheme_end + 3);
  size_t slash = rest.find('/');
  std::string_view host = rest.substr(0, slash);
  if (host.empty()) return InvalidArgument("URL '{}': no host", url);
  HttpUrl out;
  out.origin = fmt::format("{}://{}", scheme, host);
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));
  if (out.path == "/") out.path.clear();
  return out;
}

bool StreamedCompletion::OnEvent(const std::string& data, double now) {
  if (data == "[DONE]") {
    saw_done_ = true;
    return true;
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (!j.is_object()) {
    error_ = fmt::format("a streamed chunk is not JSON: {}", data.substr(0, 120));
    return false;
  }
  if (j.contains("error")) {
    const nlohmann::json& e = j["error"];
    error_ = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                                 : e.dump().substr(0, 200);
    return false;
  }
  std::string text;
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() && j["choices"][0].is_object()) {
    const nlohmann::json& choice = j["choices"][0];
    if (choice.contains("text") && choice["text"].is_string()) {
      text = choice["text"].get<std::string>();
    } else if (choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content") &&
               choice["delta"]["content"].is_string()) {
      text = choice["delta"]["content"].get<std::string>();
    }
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const nlohmann::json& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) usage_prompt_ = u["prompt_tokens"].get<int64_t>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      usage_completion_ = u["completion_tokens"].get<int64_t>();
    }
  }
  if (!text.empty()) {
    if (!saw_text_) {
      first_text_ = now;
      saw_text_ = true;
    } else {
      itl_.push_back(now - last_text_);
    }
    last_text_ = now;
    ++chunks_with_text_;
  }
  return true;
}

RequestRecord StreamedCompletion::Finish(double now, int http_status, const std::string& failure) const {
  RequestRecord r;
  r.e2e = now;
  r.ttft = first_text_;
  r.itl = itl_;
  r.prompt_tokens = usage_prompt_;
  r.output_tokens = usage_completion_ >= 0 ? usage_completion_ : chunks_with_text_;
  if (!failure.empty()) {
    r.error = failure;
  } else if (!error_.empty()) {
    r.error = "server error event: " + error_;
  } else if (http_status != 200) {
    r.error = fmt::format("HTTP {}", http_status);
  } else if (!saw_text_) {
    r.error = saw_done_ ? "the stream ended ([DONE]) without any text" : "the stream ended without any text";
  }
  r.ok = r.error.empty();
  return r;
}

Expected<ServeReport> RunServeBenchmark(const ServeOptions& o,
                                        const std::function<void(const ServeProgress&)>& on_progress) {
  KILN_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(o.url));
  if (url.path.empty()) url.path = "/v1/completions";
  if (o.concurrency.empty()) return InvalidArgument("serve: no concurrency level");
  for (int32_t c : o.concurrency) {
    if (c < 1 || c > 10000) return InvalidArgument("serve: concurrency {} outside [1, 10000]", c);
  }
  if (o.input_len < 1 || o.output_len < 1) {
    return InvalidArgument("serve: --input-len {} and --output-len {} must be positive", o.input_len, o.output_len);
  }
  if (o.num_prompts < 0 || o.num_prompts > 10000000) return InvalidArgument("serve: --num-prompts {} out of range", o.num_prompts);
  if (o.request_rate < 0 || !(o.timeout_seconds > 0)) {
    return InvalidArgument("serve: --request-rate must not be negative and the timeout must be positive");
  }
  PromptSource prompts;
  if (!o.prompts_file.empty()) {
    KILN_ASSIGN_OR_RETURN(prompts.file_prompts, ReadPrompts(o.prompts_file));
  }

  ServeReport report;
  report.options = o;
  report.endpoint = url.origin + url.path;
  report.model = o.model;
  if (report.model.empty()) {
    httplib::Client client(url.origin);
    client.set_connection_timeout(10);
    client.set_read_timeout(30);
    report.model = DiscoverModel(client, o);
  }
  const bool chat = url.path.find("chat") != std::string::npos;
  ContentionSampler sampler(o.contention);
  for (int32_t c : o.concurrency) {
    const int64_t n = o.num_prompts > 0 ? o.num_prompts : std::max<int64_t>(16, 4 * int64_t{c});
    report.levels.push_back(RunLevel(o, url, report.model, chat, c, n, prompts, sampler, on_progress));
  }
  return report;
}

std::string FormatServeTable(const ServeReport& report) {
  const ServeOptions& o = report.options;
  std::string out = fmt::format("{} (model \"{}\"): {} prompts of {} {}, max_tokens {}, {}\n", report.endpoint,
                                report.model, o.prompts_file.empty() ? "random" : "file", o.input_len,
                                o.prompt_ids ? "token ids" : "words", o.output_len,
                                o.request_rate > 0 ? fmt::format("Poisson arrivals at {:g} requests/s", o.request_rate)
                                                   : std::string("closed loop"));
  out += "Times in ms. TPOT = (end-to-end - TTFT) / (output tokens - 1) per request.\n\n";
  TextTable table({"concurrency", "done", "failed", "req/s", "output tok/s", "total tok/s", "TTFT p50", "p90", "p99",
                   "TPOT p50", "p90", "p99", "E2E p50", "p90", "p99", "note"});
  for (const ServeLevel& l : report.levels) {
    table.AddRow({std::to_string(l.concurrency), std::to_string(l.completed), std::to_string(l.failed),
                  fmt::format("{:.2f}", l.requests_per_s), fmt::format("{:.1f}", l.output_tokens_per_s),
                  l.prompt_tokens_known ? fmt::format("{:.1f}", l.total_tokens_per_s) : "-", Ms(l.ttft_s.median),
                  Ms(l.ttft_s.p90), Ms(l.ttft_s.p99), Ms(l.tpot_s.median), Ms(l.tpot_s.p90), Ms(l.tpot_s.p99),
                  Ms(l.e2e_s.median), Ms(l.e2e_s.p90), Ms(l.e2e_s.p99), l.contention.Mark()});
  }
  out += table.ToString();
  for (const ServeLevel& l : report.levels) {
    for (const std::string& e : l.errors) out += fmt::format("concurrency {}: error: {}\n", l.concurrency, e);
  }
  if (!report.levels.empty() && !report.levels.front().prompt_tokens_known) {
    out += "total tok/s: the server did not report prompt tokens (stream_options.include_usage).\n";
  }
  return out;
}

nlohmann::ordered_json ServeJson(const ServeReport& report) {
  const ServeOptions& o = report.options;
  nlohmann::ordered_json j;
  j["mode"] = "serve";
  j["endpoint"] = report.endpoint;
  j["model"] = report.model;
  j["settings"] = {{"input_len", o.input_len},     {"output_len", o.output_len},
                   {"prompt_ids", o.prompt_ids},   {"prompts_file", o.prompts_file},
                   {"request_rate", o.request_rate}, {"num_prompts", o.num_prompts},
                   {"ignore_eos", o.ignore_eos},   {"temperature", o.temperature},
                   {"seed", o.seed}};
  j["results"] = nlohmann::ordered_json::array();
  for (const ServeLevel& l : report.levels) {
    nlohmann::ordered_json level;
    level["concurrency"] = l.concurrency;
    level["request_rate"] = l.request_rate;
    level["completed"] = l.completed;
    level["failed"] = l.failed;
    level["duration_s"] = l.duration_s;
    level["requests_per_s"] = l.requests_per_s;
    level["output_tokens_per_s"] = l.output_tokens_per_s;
    level["total_tokens_per_s"] = l.prompt_tokens_known ? nlohmann::ordered_json(l.total_tokens_per_s) : nullptr;
    level["prompt_tokens"] = l.prompt_tokens_known ? nlohmann::ordered_json(l.prompt_tokens) : nullptr;
    level["output_tokens"] = l.output_tokens;
    level["ttft_s"] = ToJson(l.ttft_s);
    level["tpot_s"] = ToJson(l.tpot_s);
    level["itl_s"] = ToJson(l.itl_s);
    level["e2e_s"] = ToJson(l.e2e_s);
    level["errors"] = l.errors;
    level["contention"] = l.contention.ToJson();
    j["results"].push_back(std::move(level));
  }
  return j;
}

}  // namespace kiln::bench
