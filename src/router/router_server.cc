// Routes, forwarding with retries, stream relaying and shutdown of the
// router.
#include "router/router_server.h"

#include <sys/socket.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/log.h"
#include "router/backend_exchange.h"
#include "router/stream_start.h"
#include "server/api_error.h"
#include "server/connection_threads.h"
#include "server/http_listener.h"
#include "server/http_reply.h"
#include "server/peer_socket.h"
#include "server/sse.h"

namespace kiln::router {
namespace {

using Clock = std::chrono::steady_clock;
using OrderedJson = nlohmann::ordered_json;

constexpr int kListenBacklog = 1024;
// Reads and writes to a client that make no progress for this long end the
// connection.
constexpr int kClientSocketTimeoutSeconds = 30;
constexpr int kKeepAliveTimeoutSeconds = 5;
// How often a wait on a backend looks whether the client is still there.
constexpr auto kPollInterval = std::chrono::milliseconds(50);
// A client that closed its connection, as nginx logs it (never sent).
constexpr int kClientClosedStatus = 499;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The request headers a backend needs: the body's type, the API key, and
// what the client accepts and calls the request.
httplib::Headers ForwardedHeaders(const httplib::Request& req) {
  httplib::Headers headers;
  for (const char* name : {"Content-Type", "Authorization", "Accept", "X-Request-Id"}) {
    if (req.has_header(name)) headers.emplace(name, req.get_header_value(name));
  }
  return headers;
}

// The response headers of a backend passed on to the client, and the
// router's own saying which backend answered and why.
void SetReplyHeaders(httplib::Response& res, const BackendExchange& exchange, const std::string& url,
                     PickReason reason) {
  for (const char* name : {"Retry-After", "X-Request-Id", "WWW-Authenticate"}) {
    std::string value = exchange.header(name);
    if (!value.empty()) res.set_header(name, value);
  }
  res.set_header("x-kiln-replica", url);
  res.set_header("x-kiln-route", std::string(PickReasonName(reason)));
}

bool IsEventStream(const BackendExchange& exchange) {
  return exchange.header("Content-Type").rfind("text/event-stream", 0) == 0;
}

// Counts a request in flight through the router while it lives.
class RequestToken {
 public:
  explicit RequestToken(std::atomic<int>& count) : count_(count) { ++count_; }
  ~RequestToken() { --count_; }
  RequestToken(const RequestToken&) = delete;
  RequestToken& operator=(const RequestToken&) = delete;

 private:
  std::atomic<int>& count_;
};

// A streamed answer after its first byte: relays the backend's events as
// they arrive, ends the stream with an error event if the backend fails,
// and closes the backend connection if the client goes away.
class StreamRelay {
 public:
  // `first`: the stream's bytes received so far, sent before the rest.
  StreamRelay(RouterMetrics& metrics, std::shared_ptr<RequestToken> token, std::unique_ptr<InFlight> load,
              std::unique_ptr<BackendExchange> exchange, std::string first, int client_fd,
              Clock::time_point start, int status, const std::atomic<bool>& abort)
      : metrics_(metrics),
        token_(std::move(token)),
        load_(std::move(load)),
        exchange_(std::move(exchange)),
        first_(std::move(first)),
        client_fd_(client_fd),
        start_(start),
        status_(status),
        abort_(abort) {}

  ~StreamRelay() {
    exchange_.reset();  // closes the backend connection if still open
    metrics_.CountResponse(client_gone_ ? kClientClosedStatus : status_, SecondsSince(start_));
  }

  // One step of the HTTP library's chunked writing.
  bool Pump(httplib::DataSink& sink) {
    if (!first_.empty()) {
      std::string first;
      first.swap(first_);
      return sink.write(first.data(), first.size()) || ClientGone();
    }
    const bool finished = exchange_->finished();  // before taking: then nothing can follow
    std::string data = exchange_->TakeData();
    if (data.empty() && !finished) {
      exchange_->Wait(kPollInterval);
      data = exchange_->TakeData();
    }
    if (!data.empty()) {
      if (!sink.write(data.data(), data.size())) return ClientGone();
      return true;
    }
    if (finished) {
      if (exchange_->failed()) {
        metrics_.CountStreamError();
        KILN_LOG_WARN("router: {} failed mid-stream: {}", exchange_->backend().url(), exchange_->error());
        server::ApiError e{502,
                           fmt::format("the backend {} failed during the stream: {}",
                                       exchange_->backend().url(), exchange_->error()),
                           "server_error", "", "backend_failed"};
        const std::string event = server::SseEvent(e.ToJson());
        if (!sink.write(event.data(), event.size())) return ClientGone();
      }
      sink.done();
      return true;
    }
    if (server::PeerClosed(client_fd_) || abort_.load()) return ClientGone();
    return true;
  }

 private:
  bool ClientGone() {
    if (!client_gone_) metrics_.CountClientDisconnect();
    client_gone_ = true;
    exchange_->Cancel();
    return false;
  }

  RouterMetrics& metrics_;
  std::shared_ptr<RequestToken> token_;
  std::unique_ptr<InFlight> load_;  // released after the exchange (declared before it)
  std::unique_ptr<BackendExchange> exchange_;
  std::string first_;
  int client_fd_;
  Clock::time_point start_;
  int status_;
  const std::atomic<bool>& abort_;
  bool client_gone_ = false;
};

}  // namespace

RouterServer::RouterServer(RouterOptions options)
    : options_(std::move(options)),
      http_(std::make_unique<server::HttpListener>()),
      affinity_(options_.affinity_capacity) {
  auto add = [this](const std::vector<std::string>& urls) {
    for (const std::string& url : urls) {
      Expected<BackendAddress> address = ParseBackendUrl(url);
      if (address.ok())
        backends_.push_back(std::make_unique<Backend>(*address, options_.backend_timeout_seconds));
    }
  };
  add(options_.replicas);
  add(options_.prefill);
  num_prefill_ = options_.prefill.size();
  add(options_.decode);
  std::vector<Backend*> probed;
  for (auto& b : backends_) probed.push_back(b.get());
  health_ = std::make_unique<HealthChecker>(probed, std::chrono::milliseconds(options_.health_interval_ms),
                                            [this](int index, bool up) { OnHealthChange(index, up); });
  InstallRoutes();
}

RouterServer::~RouterServer() {
  health_.reset();
}

Status RouterServer::Bind() {
  KILN_ASSIGN_OR_RETURN(int port, http_->BindAndListen(options_.host, options_.port, kListenBacklog));
  bound_port_ = port;
  return Status::Ok();
}

void RouterServer::Serve() {
  health_->ProbeAll();
  health_->Start();
  http_->Serve();
}

int RouterServer::backends_up() const {
  int up = 0;
  for (const auto& b : backends_) up += b->up() ? 1 : 0;
  return up;
}

void RouterServer::Shutdown(double timeout_seconds) {
  std::call_once(shutdown_once_, [&] {
    draining_ = true;
    http_->StopAccepting();
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_seconds));
    while (requests_in_flight_.load() > 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(kPollInterval);
    if (requests_in_flight_.load() > 0) {
      KILN_LOG_WARN("router: {} requests still running after {} s; closing them", requests_in_flight_.load(),
                    timeout_seconds);
      abort_streams_ = true;
    }
    // What is left open is idle between requests: stop reading from it so
    // that it closes now rather than at its keep-alive timeout.
    for (int fd : server::ConnectionsOnLocalPort(bound_port_)) ::shutdown(fd, SHUT_RD);
  });
}

void RouterServer::OnHealthChange(int index, bool up) {
  Backend& backend = *backends_[static_cast<size_t>(index)];
  if (up) {
    KILN_LOG_INFO("router: {} is up; in rotation", backend.url());
    return;
  }
  KILN_LOG_WARN("router: {} is down; out of rotation until a health probe succeeds", backend.url());
  metrics_.CountBackendDown(backend.url());
  // Its prefix cache is gone if it restarted; send no one there for it.
  std::lock_guard<std::mutex> lock(affinity_mu_);
  affinity_.Forget(index);
}

ReplicaPick RouterServer::Pick(const std::vector<uint64_t>& hashes, const std::vector<bool>& tried) {
  std::vector<ReplicaLoad> loads(backends_.size());
  for (size_t i = 0; i < backends_.size(); ++i) {
    loads[i] = ReplicaLoad{backends_[i]->up(), backends_[i]->in_flight(), tried[i]};
  }
  std::lock_guard<std::mutex> lock(affinity_mu_);
  const PrefixAffinityMap::Match match = affinity_.Longest(hashes, [&](int i) {
    return loads[static_cast<size_t>(i)].up && !loads[static_cast<size_t>(i)].excluded;
  });
  ReplicaPick pick = PickReplica(loads, match.replica, options_.load_margin, rotation_++);
  // Recorded at once, so that requests sharing the prefix that arrive
  // before this one is answered follow it.
  if (pick.replica >= 0 && !hashes.empty()) affinity_.Record(hashes, pick.replica);
  metrics_.CountPick(pick.reason);
  return pick;
}

void RouterServer::Forward(const httplib::Request& req, httplib::Response& res,
                           const std::string& affinity_text, std::vector<bool> excluded) {
  const Clock::time_point start = Clock::now();
  auto token = std::make_shared<RequestToken>(requests_in_flight_);
  const std::vector<uint64_t> hashes = affinity_text.empty()
                                           ? std::vector<uint64_t>()
                                           : PrefixChainHashes(affinity_text, options_.affinity_chunk_bytes);
  const int client_fd = server::FindConnectionSocket(server::AddressOf(req));
  std::vector<bool> tried =
      excluded.empty() ? std::vector<bool>(backends_.size(), false) : std::move(excluded);
  std::string last_error;
  // A 503 from a backend (busy or stopping) is tried elsewhere, and passed
  // on if no other backend answers.
  int busy_status = 0;
  std::string busy_body, busy_type, busy_retry_after, busy_url;

  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    const ReplicaPick pick = Pick(hashes, tried);
    if (pick.replica < 0) break;
    if (attempt > 0) metrics_.CountRetry();
    tried[static_cast<size_t>(pick.replica)] = true;
    Backend& backend = *backends_[static_cast<size_t>(pick.replica)];
    auto load = std::make_unique<InFlight>(backend);
    auto exchange =
        std::make_unique<BackendExchange>(backend, req.method, req.path, ForwardedHeaders(req), req.body);

    // Nothing reaches the client before the whole answer, or a stream's
    // first output, has come: until then a failure can still be retried.
    std::string held;  // the answer's bytes so far
    while (!exchange->finished()) {
      held += exchange->TakeData();
      if (IsEventStream(*exchange) && StreamHasBegun(held)) break;
      exchange->Wait(kPollInterval);
      if (server::PeerClosed(client_fd)) {
        exchange->Cancel();
        metrics_.CountAttempt(backend.url(), "canceled");
        metrics_.CountClientDisconnect();
        metrics_.CountResponse(kClientClosedStatus, SecondsSince(start));
        res.status = kClientClosedStatus;
        res.set_header("Connection", "close");
        return;
      }
    }

    if (exchange->failed()) {
      metrics_.CountAttempt(backend.url(), "error");
      last_error = fmt::format("{}: {}", backend.url(), exchange->error());
      KILN_LOG_WARN("router: {} {} failed on {} before answering (trying another replica if any): {}",
                    req.method, req.path, backend.url(), exchange->error());
      // Nothing answered at all: out of rotation until a probe succeeds.
      if ((exchange->connect_failed() || !exchange->has_head()) && backend.SetUp(false)) {
        OnHealthChange(pick.replica, false);
      }
      continue;
    }

    const int status = exchange->status();
    metrics_.CountAttempt(backend.url(), std::to_string(status));
    const std::string content_type = exchange->header("Content-Type");
    if (exchange->finished()) {
      if (status == 503 && attempt + 1 < options_.max_attempts) {
        busy_status = status;
        busy_body = held + exchange->TakeData();
        busy_type = content_type;
        busy_retry_after = exchange->header("Retry-After");
        busy_url = backend.url();
        last_error = fmt::format("{}: busy (HTTP 503)", backend.url());
        continue;
      }
      res.status = status;
      SetReplyHeaders(res, *exchange, backend.url(), pick.reason);
      res.set_content(held + exchange->TakeData(), content_type.empty() ? "application/json" : content_type);
      metrics_.CountResponse(status, SecondsSince(start));
      return;
    }

    res.status = status;
    SetReplyHeaders(res, *exchange, backend.url(), pick.reason);
    auto relay = std::make_shared<StreamRelay>(metrics_, token, std::move(load), std::move(exchange),
                                               std::move(held), client_fd, start, status, abort_streams_);
    res.set_chunked_content_provider(content_type,
                                     [relay](size_t, httplib::DataSink& sink) { return relay->Pump(sink); });
    return;
  }

  if (busy_status != 0) {
    res.status = busy_status;
    if (!busy_retry_after.empty()) res.set_header("Retry-After", busy_retry_after);
    res.set_header("x-kiln-replica", busy_url);
    res.set_content(busy_body, busy_type.empty() ? "application/json" : busy_type);
    metrics_.CountResponse(busy_status, SecondsSince(start));
    return;
  }
  server::ApiError e;
  e.type = "server_error";
  if (last_error.empty()) {
    e.http_status = 503;
    e.message = "no backend is up (every replica failed its health check)";
    e.code = "no_backend";
  } else {
    e.http_status = 502;
    e.message = fmt::format("no backend could answer the request; the last failure: {}", last_error);
    e.code = "backend_unavailable";
  }
  server::ReplyError(res, e);
  metrics_.CountResponse(e.http_status, SecondsSince(start));
}

void RouterServer::ForwardDisaggregated(const httplib::Request& req, httplib::Response& res) {
  const Clock::time_point start = Clock::now();
  auto token = std::make_shared<RequestToken>(requests_in_flight_);
  const int client_fd = server::FindConnectionSocket(server::AddressOf(req));
  const size_t num_decode = backends_.size() - num_prefill_;
  // A prefill instance's decode instance: the only one, or its pair.
  auto decode_of = [&](size_t prefill) { return num_prefill_ + (num_decode == 1 ? 0 : prefill); };
  auto fail = [&](int status, std::string message, std::string body = {}, std::string type = {}) {
    metrics_.CountDisaggregated("prefill_failed");
    metrics_.CountResponse(status, SecondsSince(start));
    if (!body.empty()) {
      res.status = status;
      res.set_content(body, type.empty() ? "application/json" : type);
      return;
    }
    server::ReplyError(res,
                       server::ApiError{status, std::move(message), "server_error", "", "prefill_failed"});
  };

  std::vector<bool> tried(num_prefill_, false);
  std::string last_error;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    // The least loaded prefill instance that is up, with its decode
    // instance up, not tried yet.
    int chosen = -1;
    for (size_t i = 0; i < num_prefill_; ++i) {
      const Backend& b = *backends_[i];
      if (tried[i] || !b.up() || !backends_[decode_of(i)]->up()) continue;
      if (chosen < 0 || b.in_flight() < backends_[static_cast<size_t>(chosen)]->in_flight()) {
        chosen = static_cast<int>(i);
      }
    }
    if (chosen < 0) break;
    if (attempt > 0) metrics_.CountRetry();
    tried[static_cast<size_t>(chosen)] = true;
    Backend& prefill = *backends_[static_cast<size_t>(chosen)];
    InFlight load(prefill);
    BackendExchange exchange(prefill, req.method, req.path, ForwardedHeaders(req), req.body);
    while (!exchange.finished()) {
      exchange.Wait(kPollInterval);
      if (server::PeerClosed(client_fd)) {
        exchange.Cancel();
        metrics_.CountClientDisconnect();
        metrics_.CountResponse(kClientClosedStatus, SecondsSince(start));
        res.status = kClientClosedStatus;
        res.set_header("Connection", "close");
        return;
      }
    }
    if (exchange.failed()) {
      // Nothing has reached the client: another prefill instance may run it.
      metrics_.CountAttempt(prefill.url(), "error");
      last_error = fmt::format("the prefill instance {} failed: {}", prefill.url(), exchange.error());
      KILN_LOG_WARN("router: {}", last_error);
      if ((exchange.connect_failed() || !exchange.has_head()) && prefill.SetUp(false)) {
        OnHealthChange(chosen, false);
      }
      continue;
    }
    metrics_.CountAttempt(prefill.url(), std::to_string(exchange.status()));
    const std::string body = exchange.TakeData();
    if (exchange.status() == 503) {
      last_error = fmt::format("the prefill instance {} is busy (HTTP 503)", prefill.url());
      continue;
    }
    if (exchange.status() != 200) {
      // Its refusal (a bad request, a prompt too long, a failed transfer)
      // is the client's answer.
      return fail(exchange.status(), "", body, exchange.header("Content-Type"));
    }
    const OrderedJson reply = OrderedJson::parse(body, nullptr, /*allow_exceptions=*/false);
    if (reply.is_discarded() || !reply.contains("kv_transfer")) {
      return fail(502, fmt::format("{} answered without a KV transfer: is it running with --role prefill?",
                                   prefill.url()));
    }
    metrics_.CountDisaggregated("decoded");
    std::vector<bool> excluded(backends_.size(), true);
    excluded[decode_of(static_cast<size_t>(chosen))] = false;
    token.reset();  // Forward counts the request itself
    return Forward(req, res, "", std::move(excluded));
  }
  if (last_error.empty()) return fail(503, "no prefill instance is up (with its decode instance)");
  fail(502, fmt::format("no prefill instance could run the prompt; the last failure: {}", last_error));
}

void RouterServer::InstallRoutes() {
  server::HttpListener& http = *http_;
  const int max_connections = options_.max_concurrent_connections;
  http.new_task_queue = [max_connections] { return new server::ConnectionThreads(max_connections); };
  http.set_tcp_nodelay(true);
  http.set_keep_alive_max_count(1000);
  http.set_keep_alive_timeout(kKeepAliveTimeoutSeconds);
  http.set_read_timeout(kClientSocketTimeoutSeconds);
  http.set_write_timeout(kClientSocketTimeoutSeconds);
  http.set_payload_max_length(options_.max_body_size);

  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_ || res.status == kClientClosedStatus) return;
    server::ApiError e;
    e.http_status = res.status;
    switch (res.status) {
      case 404:
        e.message = fmt::format("no such endpoint: {} {}", req.method, req.path);
        e.code = "not_found";
        break;
      case 413:
        e.message = "the request body is too large (--max-body-size)";
        e.code = "payload_too_large";
        break;
      default: e.message = fmt::format("the request could not be served (HTTP {})", res.status); break;
    }
    if (res.status >= 500) e.type = "server_error";
    server::ReplyError(res, e);
  });

  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    KILN_LOG_ERROR("router: request failed: {}", what);
    server::ReplyError(res, server::ApiError{500, "internal error: " + what, "server_error", "", ""});
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    int up = backends_up();
    const int total = static_cast<int>(backends_.size());
    if (options_.disaggregated()) {
      // Serving needs both sides.
      int prefill_up = 0;
      for (size_t i = 0; i < num_prefill_; ++i) prefill_up += backends_[i]->up() ? 1 : 0;
      if (prefill_up == 0 || prefill_up == up) up = 0;
    }
    if (draining_) return server::ReplyJson(res, 503, {{"status", "shutting down"}});
    if (up == 0) {
      res.set_header("Retry-After", std::to_string(server::kRetryAfterSeconds));
      return server::ReplyJson(res, 503,
                               {{"status", "no backend up"}, {"backends_up", 0}, {"backends", total}});
    }
    server::ReplyJson(res, 200, {{"status", "ok"}, {"backends_up", up}, {"backends", total}});
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::vector<const Backend*> view;
    for (const auto& b : backends_) view.push_back(b.get());
    res.status = 200;
    res.set_content(metrics_.Render(view), "text/plain; version=0.0.4; charset=utf-8");
  });

  auto by_load = [this](const httplib::Request& req, httplib::Response& res) { Forward(req, res, ""); };
  http.Get("/v1/models", by_load);
  http.Get(R"(/v1/models/(.+))", by_load);
  http.Post("/tokenize", by_load);
  http.Post("/detokenize", by_load);
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (options_.disaggregated()) return ForwardDisaggregated(req, res);
    Forward(req, res, AffinityText(req.body, ApiKind::kCompletion));
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (options_.disaggregated()) return ForwardDisaggregated(req, res);
    Forward(req, res, AffinityText(req.body, ApiKind::kChat));
  });
}

}  // namespace kiln::router
