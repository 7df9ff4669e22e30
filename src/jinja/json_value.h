// Turns the JSON a caller passes (messages, tools, extra variables) into
// template values the way Python's json module would: objects become dicts,
// arrays lists, integers ints and other numbers floats.
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "jinja/value.h"

namespace kiln::jinja {

// Converts `json`. Objects keep the container's key order: insertion order
// for ordered_json (as Python dicts do), sorted for nlohmann::json. Fails
// for invalid UTF-8, integers beyond 64 bits, binary values and nesting
// deeper than kMaxValueDepth.
Expected<Value> ValueFromJson(const nlohmann::json& json);
Expected<Value> ValueFromJson(const nlohmann::ordered_json& json);

}  // namespace kiln::jinja
