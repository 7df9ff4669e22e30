// Server-sent event framing.
#include "server/sse.h"

namespace kiln::server {

std::string JsonText(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string SseEvent(const nlohmann::ordered_json& payload) {
  // JSON text never holds a raw newline, so one data line carries it whole.
  return "data: " + JsonText(payload) + "\n\n";
}

}  // namespace kiln::server
