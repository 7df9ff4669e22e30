// Server option checks and the default served model name.
#include "server/server_options.h"

#include <filesystem>

namespace kiln::server {

Status ServerOptions::Validate() const {
  if (host.empty()) return InvalidArgument("--host must not be empty");
  if (port < 0 || port > 65535) return InvalidArgument("--port must be in [0, 65535], got {}", port);
  if (max_body_size < 1024) return InvalidArgument("--max-body-size must be at least 1024 bytes, got {}", max_body_size);
  if (max_concurrent_connections < 1 || max_concurrent_connections > 65536) {
    return InvalidArgument("--max-concurrent-connections must be in [1, 65536], got {}",
                           max_concurrent_connections);
  }
  if (max_queued_requests < 1) {
    return InvalidArgument("--max-queued-requests must be at least 1, got {}", max_queued_requests);
  }
  if (!(shutdown_timeout_seconds >= 0)) {
    return InvalidArgument("--shutdown-timeout must be >= 0 seconds, got {}", shutdown_timeout_seconds);
  }
  if (role != "both" && role != "prefill" && role != "decode") {
    return InvalidArgument("--role must be prefill, decode or both, got '{}'", role);
  }
  if (!(kv_transfer_timeout_seconds > 0)) {
    return InvalidArgument("--kv-transfer-timeout must be > 0 seconds, got {}", kv_transfer_timeout_seconds);
  }
  if (keep_alive_timeout_seconds < 1) {
    return InvalidArgument("keep-alive timeout must be at least 1 second, got {}", keep_alive_timeout_seconds);
  }
  return Status::Ok();
}

std::string DefaultServedModelName(const std::string& model_path) {
  std::filesystem::path path(model_path);
  // "dir/" -> "dir"; the root is its own parent.
  while (!path.empty() && path.filename().empty() && path.parent_path() != path) path = path.parent_path();
  std::filesystem::path name = path.filename();
  if (name == "." || name == "..") {
    name = std::filesystem::weakly_canonical(std::filesystem::absolute(path)).filename();
  }
  if (name.extension() == ".gguf") name = name.stem();
  std::string result = name.string();
  return result.empty() ? std::string("model") : result;
}

}  // namespace kiln::server
