// The HTTP front end of `kiln serve`: an OpenAI-compatible API over one
// engine. HTTP threads (one per open connection) only parse, queue and
// stream; the model runs on the engine loop's single thread.
//
//   GET  /                     the chat page (and its /chat.js, /chat.css, /favicon.svg)
//   GET  /health               200 once the model is loaded, 503 before and while stopping
//   GET  /metrics              Prometheus text
//   GET  /v1/models            the served model
//   POST /v1/chat/completions  chat, streamed or whole
//   POST /v1/completions       text completion, streamed or whole
//   POST /tokenize, /detokenize
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "server/server_options.h"
#include "server/server_state.h"

namespace kiln {
class LLMEngine;
}

namespace kiln::server {

class HttpListener;

class ApiServer {
 public:
  // REQUIRES: options.Validate() is ok and options.served_model_name is set.
  explicit ApiServer(ServerOptions options);
  // Stops the engine loop; Serve() must have returned.
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0: a free one) and starts listening; connections
  // queue until Serve(). The error names the address.
  Status Bind();
  // The bound port. REQUIRES: Bind() succeeded.
  int port() const;

  // Serves connections until Shutdown(), then returns once every
  // connection has closed. REQUIRES: Bind() succeeded.
  void Serve();

  // Takes the loaded engine and starts its loop; generation requests are
  // served from now on and /health answers 200. Thread-safe.
  void AttachEngine(std::unique_ptr<LLMEngine> engine);

  // Stops accepting connections and refuses new generation requests, lets
  // those in flight finish for up to `timeout_seconds`, then aborts the
  // rest; returns once none is in flight, closing idle kept-alive
  // connections, so that Serve() returns soon after. Thread-safe; later
  // calls return at once.
  void Shutdown(double timeout_seconds);

  ServerState& state() { return state_; }

 private:
  void InstallRoutes();
  // After the shutdown timeout: aborts every request and waits a little
  // for them to end.
  void AbortRemaining(double timeout_seconds);

  ServerState state_;
  std::unique_ptr<HttpListener> http_;
  int bound_port_ = -1;
  std::mutex engine_mu_;
  std::unique_ptr<LLMEngine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::once_flag shutdown_once_;
};

}  // namespace kiln::server
