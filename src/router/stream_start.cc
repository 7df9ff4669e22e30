// Preamble events recognized by their JSON.
#include "router/stream_start.h"

#include <nlohmann/json.hpp>

namespace kiln::router {
namespace {

using Json = nlohmann::json;

bool IsEmptyText(const Json& value) {
  return value.is_null() || (value.is_string() && value.get_ref<const std::string&>().empty());
}

// An event whose every choice says only who speaks.
bool IsPreamble(std::string_view event) {
  constexpr std::string_view kData = "data: ";
  if (event.substr(0, kData.size()) != kData) return false;
  Json payload = Json::parse(event.substr(kData.size()), nullptr, /*allow_exceptions=*/false);
  if (!payload.is_object()) return false;
  auto choices = payload.find("choices");
  if (choices == payload.end() || !choices->is_array() || choices->empty()) return false;
  for (const Json& choice : *choices) {
    if (!choice.is_object()) return false;
    for (const auto& [key, value] : choice.items()) {
      if (key == "index") continue;
      if ((key == "finish_reason" || key == "logprobs") && value.is_null()) continue;
      if (key != "delta" || !value.is_object()) return false;
      for (const auto& [field, content] : value.items()) {
        if (field == "role") continue;
        if (field == "content" && IsEmptyText(content)) continue;
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool StreamHasBegun(std::string_view sse) {
  size_t start = 0;
  while (true) {
    const size_t end = sse.find("\n\n", start);
    if (end == std::string_view::npos) return false;  // no complete event beyond the preambles
    if (!IsPreamble(sse.substr(start, end - start))) return true;
    start = end + 2;
  }
}

}  // namespace kiln::router
