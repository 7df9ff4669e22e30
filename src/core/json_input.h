// Reading untrusted JSON (tokenizer and model files, prompt files, request
// bodies): parsing with bounded nesting, field lookup and typed accessors
// whose errors name the file and field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

// Parses `text`; `name` prefixes error messages. Rejects nesting deeper
// than 128 levels before parsing.
Expected<nlohmann::json> ParseJsonText(std::string_view text, const std::string& name);

// Reads and parses a file.
Expected<nlohmann::json> ReadJsonFile(const std::string& path);

// Field accessors on an object `obj` (which may be any JSON value; a
// non-object has no fields). Absent or null fields give `fallback`; a field
// of the wrong type is an error naming `where` and the key.
Expected<bool> JsonBool(const nlohmann::json& obj, std::string_view key, bool fallback,
                        std::string_view where);
Expected<std::string> JsonString(const nlohmann::json& obj, std::string_view key, std::string_view fallback,
                                 std::string_view where);
// Integers must fit int32.
Expected<int32_t> JsonInt(const nlohmann::json& obj, std::string_view key, int32_t fallback,
                          std::string_view where);
// `value` itself as an int32; the error names `where`.
Expected<int32_t> JsonAsInt(const nlohmann::json& value, std::string_view where);

// The field, or nullptr when `obj` is not an object or lacks it.
const nlohmann::json* JsonField(const nlohmann::json& obj, std::string_view key);

// The value of an integral JSON number within int64 ("4", or "4.0" as a
// JavaScript client writes it), or nothing for any other value.
std::optional<int64_t> JsonInteger(const nlohmann::json& value);

// The JSON type of `value` as a person would name it ("string", "number", ...).
const char* JsonTypeName(const nlohmann::json& value);

}  // namespace kiln
