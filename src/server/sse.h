// Server-sent events as OpenAI streams them: each event one "data: <json>"
// line and a blank line; the stream ends with "data: [DONE]".
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::server {

// JSON text on one line. Bytes that are not UTF-8 (which a client may have
// sent inside a name) become U+FFFD rather than failing the response.
std::string JsonText(const nlohmann::ordered_json& value);

// "data: <json>\n\n".
std::string SseEvent(const nlohmann::ordered_json& payload);

// The event that ends a stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace kiln::server
