// How `kiln serve` listens, whom it serves and how much it accepts at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace kiln::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  // The name clients give as "model"; empty: the model folder's or file's name.
  std::string served_model_name;
  // When set, every request but /health and /metrics needs
  // "Authorization: Bearer <api_key>".
  std::string api_key;
  // Request bodies larger than this are refused with 413.
  size_t max_body_size = size_t{16} << 20;
  // Connections served at once, each on its own thread (streams included);
  // more wait for a free one.
  int max_concurrent_connections = 512;
  // Generation requests accepted but not yet started (no token produced);
  // beyond this, 503 with Retry-After.
  int max_queued_requests = 256;
  // On SIGTERM, how long running requests may take to finish before they
  // are aborted.
  double shutdown_timeout_seconds = 30;
  // One line per request on stderr (request id, status, tokens, latency).
  bool access_log = true;
  // Prefill/decode disaggregation: "both" (an ordinary server), "prefill"
  // (each request runs its prompt and one token, its KV blocks go to the
  // decode instance, and the answer comes once they have landed there) or
  // "decode" (takes KV blocks from prefill instances into its prefix cache).
  std::string role = "both";
  // How long a prefill instance waits for the decode instance to
  // acknowledge a request's KV blocks.
  double kv_transfer_timeout_seconds = 30;
  // A prefill instance sends each prompt block as layer slices during the
  // pass that computes it, each as its layer is written; false: whole
  // blocks after the pass.
  bool kv_send_per_layer = true;
  // Idle time after which a kept-alive connection is closed.
  int keep_alive_timeout_seconds = 5;

  // Checks ranges; the message names the flag.
  Status Validate() const;
};

// The name a model is served under by default: the last component of its
// path, without a .gguf extension ("models/tiny-qwen2/" -> "tiny-qwen2").
std::string DefaultServedModelName(const std::string& model_path);

}  // namespace kiln::server
