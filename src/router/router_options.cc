// Validation of the router's flags and backend URLs.
#include "router/router_options.h"

#include <charconv>

namespace kiln::router {

Expected<BackendAddress> ParseBackendUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    return InvalidArgument("backend URL \"{}\": https is not supported; give http://host:port", url);
  }
  if (url.rfind(scheme, 0) != 0) {
    return InvalidArgument("backend URL \"{}\" must start with http:// (e.g. http://127.0.0.1:8001)", url);
  }
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return InvalidArgument("backend URL \"{}\" must not have a path: give http://host:port", url);
  }
  BackendAddress address;
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    address.host = rest;
  } else {
    address.host = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
      return InvalidArgument("backend URL \"{}\": \"{}\" is not a port (1-65535)", url, port);
    }
    address.port = value;
  }
  if (address.host.empty()) return InvalidArgument("backend URL \"{}\" has no host", url);
  address.url = scheme + address.host + ":" + std::to_string(address.port);
  return address;
}

Status RouterOptions::Validate() const {
  if (!prefill.empty() || !decode.empty()) {
    if (!replicas.empty()) return InvalidArgument("give either --replica or --prefill with --decode, not both");
    if (prefill.empty() || decode.empty()) {
      return InvalidArgument("prefill/decode mode needs both --prefill URL and --decode URL");
    }
    if (decode.size() != 1 && decode.size() != prefill.size()) {
      return InvalidArgument(
          "{} --prefill and {} --decode instances: give one --decode (it takes every prefill instance's KV), "
          "or one per --prefill (the i-th prefill instance sends to the i-th decode instance)",
          prefill.size(), decode.size());
    }
  } else if (replicas.empty()) {
    return InvalidArgument("no backends: give --replica URL at least once (or --prefill and --decode)");
  }
  std::vector<std::string> seen;
  for (const auto* list : {&replicas, &prefill, &decode}) {
    const char* flag = list == &replicas ? "--replica" : list == &prefill ? "--prefill" : "--decode";
    for (const std::string& url : *list) {
      KILN_ASSIGN_OR_RETURN(BackendAddress address, ParseBackendUrl(url));
      for (const std::string& other : seen) {
        if (other == address.url) return InvalidArgument("{} {} is given twice", flag, address.url);
      }
      seen.push_back(address.url);
    }
  }
  if (port < 0 || port > 65535) return InvalidArgument("--port {} is not a port (0-65535)", port);
  if (health_interval_ms < 10)
    return InvalidArgument("--health-interval-ms must be at least 10, not {}", health_interval_ms);
  if (affinity_chunk_bytes < 1) return InvalidArgument("--affinity-chunk must be at least 1 byte");
  if (affinity_capacity < 1) return InvalidArgument("--affinity-capacity must be at least 1");
  if (load_margin < 0) return InvalidArgument("--load-margin must not be negative, not {}", load_margin);
  if (max_attempts < 1) return InvalidArgument("--max-attempts must be at least 1, not {}", max_attempts);
  if (backend_timeout_seconds < 1) {
    return InvalidArgument("--backend-timeout must be at least 1 second, not {}", backend_timeout_seconds);
  }
  if (max_concurrent_connections < 1) {
    return InvalidArgument("--max-concurrent-connections must be at least 1, not {}",
                           max_concurrent_connections);
  }
  if (shutdown_timeout_seconds < 0) return InvalidArgument("--shutdown-timeout must not be negative");
  return Status::Ok();
}

}  // namespace kiln::router
