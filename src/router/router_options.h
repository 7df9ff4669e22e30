// How `kiln router` listens, which backends it spreads requests over, and
// how it picks, probes and retries them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  // The base URLs of the `kiln serve` replicas ("http://host:port").
  std::vector<std::string> replicas;
  // Prefill/decode mode instead of replicas: `kiln serve --role prefill`
  // and `--role decode` instances. A request runs its prompt on a prefill
  // instance, which sends its KV blocks to its decode instance, and is then
  // answered by that decode instance. One decode instance takes every
  // prefill instance's blocks, or the i-th prefill instance sends to the
  // i-th decode instance (as their --kv-peer says).
  std::vector<std::string> prefill;
  std::vector<std::string> decode;
  // How often each backend's /health is probed.
  int health_interval_ms = 1000;
  // Prompt text is hashed in chunks of this many bytes for prefix affinity.
  size_t affinity_chunk_bytes = 256;
  // Chunk-chain hashes remembered (least recently used ones are forgotten).
  size_t affinity_capacity = 65536;
  // A request goes to the replica holding its prefix unless that replica has
  // more than this many requests in flight beyond the least loaded one.
  int load_margin = 4;
  // Backends tried for one request before the router gives up (502).
  int max_attempts = 3;
  // A backend that sends nothing for this long has failed the request.
  int backend_timeout_seconds = 600;
  // Connections served at once (streams included), each on its own thread.
  int max_concurrent_connections = 512;
  // Larger request bodies are refused with 413.
  size_t max_body_size = size_t{16} << 20;
  // On SIGTERM, how long requests in flight may take to finish.
  double shutdown_timeout_seconds = 30;

  bool disaggregated() const { return !prefill.empty(); }

  // Checks ranges and URLs; the message names the flag.
  Status Validate() const;
};

// A backend's address as a base URL gives it.
struct BackendAddress {
  std::string host;
  int port = 80;
  // "http://host:port", the form used in headers, logs and metrics.
  std::string url;
};

// Parses "http://host[:port][/]"; the error says what is wrong with `url`.
// https is refused (the router is built without TLS).
Expected<BackendAddress> ParseBackendUrl(const std::string& url);

}  // namespace kiln::router
