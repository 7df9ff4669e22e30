// Routes, authentication, body limits, errors and graceful shutdown of the
// HTTP front end.
#include "server/api_server.h"

#include <algorithm>
#include <chrono>

#include <sys/socket.h>

#include <fmt/format.h>

#include "core/log.h"
#include "engine/llm_engine.h"
#include "server/access_log.h"
#include "server/chat_page.h"
#include "server/completion_endpoint.h"
#include "server/connection_threads.h"
#include "server/http_listener.h"
#include "server/http_reply.h"
#include "server/peer_socket.h"
#include "server/tokenize_endpoint.h"

namespace kiln::server {
namespace {

using Json = nlohmann::ordered_json;

// Connections the kernel holds for the accept loop: enough for a burst of
// hundreds of clients connecting at once.
constexpr int kListenBacklog = 1024;
// Reads and writes that make no progress for this long end the connection.
constexpr int kSocketTimeoutSeconds = 30;
// Bytes of an oversized chunked body read and dropped before answering 413.
constexpr size_t kMaxDiscardedBytes = size_t{64} << 20;
// After the shutdown timeout, how long aborted requests get to end.
constexpr double kAbortGraceSeconds = 10;

// Monitoring probes: open without the API key, and not counted as requests.
bool IsProbe(const std::string& path) { return path == "/health" || path == "/metrics"; }

// Compares in time independent of where the strings differ, so that the
// key cannot be guessed byte by byte from response times.
bool SameSecret(const std::string& given, const std::string& key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

// The request body, read up to `limit` bytes. False when the answer is
// already written: 413 for a larger body, 400 for one that broke off.
bool ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
              size_t limit, std::string* body) {
  if (req.is_multipart_form_data()) {
    ReplyError(res, BadRequest("", "the request body must be JSON, not multipart form data"));
    return false;
  }
  // Without Content-Length or chunking a request has no body (RFC 9112),
  // and the JSON parser will say so; reading would wait for the timeout.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return true;
  // Past the limit the rest of a chunked body is read and dropped, up to a
  // bound, so that a client still sending gets its 413 instead of a reset
  // connection; beyond the bound the connection is cut.
  const size_t discard_bound = std::max(kMaxDiscardedBytes, 4 * limit);
  size_t received = 0;
  bool ok = reader([&](const char* data, size_t length) {
    received += length;
    if (received > limit) {
      body->clear();
      return received <= discard_bound;
    }
    body->append(data, length);
    return true;
  });
  const bool too_large = received > limit;
  // The library refuses a declared Content-Length beyond the limit itself
  // (status 413); a chunked body is measured here.
  if (too_large || res.status == 413) {
    ApiError e;
    e.http_status = 413;
    e.message = fmt::format("the request body exceeds the limit of {} bytes (--max-body-size)", limit);
    e.code = "payload_too_large";
    res.set_header("Connection", "close");
    ReplyError(res, e);
    return false;
  }
  if (!ok) {
    ReplyError(res, BadRequest("", "the request body could not be read"));
    return false;
  }
  return true;
}

std::chrono::steady_clock::time_point SecondsFromNow(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

Json ModelJson(const ServerState& state) {
  Json model;
  model["id"] = state.model_name();
  model["object"] = "model";
  model["created"] = state.created();
  model["owned_by"] = "kiln";
  if (EngineLoop* loop = state.engine_loop()) model["max_model_len"] = loop->engine().max_model_len();
  return model;
}

}  // namespace

ApiServer::ApiServer(ServerOptions options) : state_(std::move(options)), http_(std::make_unique<HttpListener>()) {
  InstallRoutes();
}

ApiServer::~ApiServer() {
  if (loop_) loop_->Stop();
  loop_.reset();
  engine_.reset();
}

Status ApiServer::Bind() {
  const ServerOptions& o = state_.options();
  KILN_ASSIGN_OR_RETURN(int port, http_->BindAndListen(o.host, o.port, kListenBacklog));
  bound_port_ = port;
  return Status::Ok();
}

int ApiServer::port() const { return bound_port_; }

void ApiServer::Serve() { http_->Serve(); }

void ApiServer::AttachEngine(std::unique_ptr<LLMEngine> engine) {
  std::lock_guard<std::mutex> lock(engine_mu_);
  engine_ = std::move(engine);
  loop_ = std::make_unique<EngineLoop>(*engine_);
  state_.set_engine_loop(loop_.get());
}

void ApiServer::Shutdown(double timeout_seconds) {
  std::call_once(shutdown_once_, [&] {
    state_.set_draining();
    http_->StopAccepting();
    if (!state_.WaitForNoRequests(SecondsFromNow(timeout_seconds))) AbortRemaining(timeout_seconds);
    // What is left open is idle between requests (or answering a probe):
    // stop reading from it, so that it closes now rather than when its
    // keep-alive timeout ends. Writing is unaffected.
    for (int fd : ConnectionsOnLocalPort(bound_port_)) ::shutdown(fd, SHUT_RD);
  });
}

void ApiServer::AbortRemaining(double timeout_seconds) {
  KILN_LOG_WARN("shutdown: {} requests still running after {} s; aborting them", state_.num_requests(),
                timeout_seconds);
  if (EngineLoop* loop = state_.engine_loop()) loop->AbortAll();
  if (!state_.WaitForNoRequests(SecondsFromNow(kAbortGraceSeconds))) {
    KILN_LOG_WARN("shutdown: {} requests did not end after being aborted", state_.num_requests());
  }
}

void ApiServer::InstallRoutes() {
  HttpListener& http = *http_;
  ServerState& state = state_;
  const ServerOptions& o = state.options();
  const int max_connections = o.max_concurrent_connections;
  http.new_task_queue = [max_connections] { return new ConnectionThreads(max_connections); };
  http.set_tcp_nodelay(true);
  http.set_keep_alive_max_count(1000);
  http.set_keep_alive_timeout(o.keep_alive_timeout_seconds);
  http.set_read_timeout(kSocketTimeoutSeconds);
  http.set_write_timeout(kSocketTimeoutSeconds);
  http.set_payload_max_length(o.max_body_size);

  // Before routing: the request's log record, then the API key.
  http.set_pre_routing_handler([&state](const httplib::Request& req, httplib::Response& res) {
    AccessRecord& record = CurrentAccessRecord();
    record = AccessRecord();
    record.start_time = EngineClock();
    const std::string& key = state.options().api_key;
    // The chat page loads without the key; it sends the key on its API calls.
    const bool page_file = (req.method == "GET" || req.method == "HEAD") && IsChatPagePath(req.path);
    if (key.empty() || IsProbe(req.path) || page_file) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && SameSecret(auth.substr(prefix.size()), key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    ApiError e;
    e.http_status = 401;
    e.message = auth.empty() ? "missing API key: send the header \"Authorization: Bearer <key>\""
                             : "incorrect API key";
    e.code = "invalid_api_key";
    res.set_header("WWW-Authenticate", "Bearer");
    ReplyError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });

  // A declared body beyond the limit is refused before the client sends it.
  http.set_expect_100_continue_handler([&state](const httplib::Request& req, httplib::Response& res) {
    size_t length = req.get_header_value<uint64_t>("Content-Length");
    if (length > state.options().max_body_size) {
      res.set_header("Connection", "close");
      ApiError e;
      e.http_status = 413;
      e.message = fmt::format("the request body exceeds the limit of {} bytes (--max-body-size)",
                              state.options().max_body_size);
      e.code = "payload_too_large";
      ReplyError(res, e);
      return 413;
    }
    return 100;
  });

  // Answers the library makes itself (no route, unreadable requests) get
  // an OpenAI-shaped body too.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;
    ApiError e;
    e.http_status = res.status;
    switch (res.status) {
      case 404: e.message = fmt::format("no such endpoint: {} {}", req.method, req.path); e.code = "not_found"; break;
      case 413: e.message = "the request is too large"; e.code = "payload_too_large"; break;
      case 414: e.message = "the request URI is too long"; break;
      default: e.message = fmt::format("the request could not be served (HTTP {})", res.status); break;
    }
    if (res.status >= 500) e.type = "server_error";
    ReplyError(res, e);
  });

  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    KILN_LOG_ERROR("request failed: {}", what);
    ReplyError(res, ApiError{500, "internal error: " + what, "server_error", "", ""});
  });

  http.set_logger([&state](const httplib::Request& req, const httplib::Response& res) {
    AccessRecord& record = CurrentAccessRecord();
    if (!IsProbe(req.path)) state.metrics().CountResponse(res.status);
    if (state.options().access_log) {
      KILN_LOG_INFO("access: {}", AccessLine(record, req.remote_addr, req.remote_port, req.method, req.path,
                                             res.status, EngineClock()));
    }
    record = AccessRecord();
  });

  http.Get("/health", [&state](const httplib::Request&, httplib::Response& res) {
    if (state.draining()) {
      res.set_header("Retry-After", std::to_string(kRetryAfterSeconds));
      return ReplyJson(res, 503, {{"status", "shutting down"}});
    }
    if (state.engine_loop() == nullptr) {
      res.set_header("Retry-After", std::to_string(kRetryAfterSeconds));
      return ReplyJson(res, 503, {{"status", "loading"}});
    }
    ReplyJson(res, 200, {{"status", "ok"}});
  });

  http.Get("/metrics", [&state](const httplib::Request&, httplib::Response& res) {
    EngineLoop* loop = state.engine_loop();
    EngineCounters counters;
    if (loop != nullptr) counters = loop->engine().Counters();
    res.status = 200;
    res.set_content(state.metrics().Render(loop != nullptr ? &counters : nullptr),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  InstallChatPageRoutes(http);

  http.Get("/v1/models", [&state](const httplib::Request&, httplib::Response& res) {
    ReplyJson(res, 200, {{"object", "list"}, {"data", Json::array({ModelJson(state)})}});
  });
  http.Get(R"(/v1/models/(.+))", [&state](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != state.model_name()) {
      return ReplyError(res, ApiError{404, fmt::format("The model `{}` does not exist.", req.matches[1].str()),
                                      "invalid_request_error", "model", "model_not_found"});
    }
    ReplyJson(res, 200, ModelJson(state));
  });

  // POST routes read their bodies themselves, to bound them (the library
  // would read a chunked body of any size).
  auto post = [&http, &state](const char* path, auto serve) {
    http.Post(path, [&state, serve](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
      std::string body;
      if (!ReadBody(req, res, reader, state.options().max_body_size, &body)) return;
      serve(req, body, res);
    });
  };
  post("/v1/chat/completions", [&state](const httplib::Request& req, const std::string& body, httplib::Response& res) {
    ServeCompletion(state, Endpoint::kChat, req, body, res);
  });
  post("/v1/completions", [&state](const httplib::Request& req, const std::string& body, httplib::Response& res) {
    ServeCompletion(state, Endpoint::kCompletion, req, body, res);
  });
  post("/tokenize", [&state](const httplib::Request&, const std::string& body, httplib::Response& res) {
    ServeTokenize(state, body, res);
  });
  post("/detokenize", [&state](const httplib::Request&, const std::string& body, httplib::Response& res) {
    ServeDetokenize(state, body, res);
  });
}

}  // namespace kiln::server
