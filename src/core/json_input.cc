// Guarded JSON parsing and typed reads of its fields.
#include "core/json_input.h"

#include "core/json_brackets.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/json_brackets.h"
#include "core/mapped_file.h"

namespace kiln {
namespace {

constexpr int kMaxJsonDepth = 128;

// The deepest bracket nesting of `text`, ignoring brackets inside strings.
int NestingDepth(std::string_view text) {
  JsonBrackets brackets;
  int deepest = 0;
  for (char c : text) deepest = std::max(deepest, brackets.Push(c));
  return deepest;
}

}  // namespace

Expected<nlohmann::json> ParseJsonText(std::string_view text, const std::string& name) {
  if (NestingDepth(text) > kMaxJsonDepth)
    return Corrupt("{}: JSON nested deeper than {} levels", name, kMaxJsonDepth);
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Corrupt("{}: not valid JSON", name);
  return value;
}

Expected<nlohmann::json> ReadJsonFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJsonText(text, path);
}

const nlohmann::json* JsonField(const nlohmann::json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Expected<bool> JsonBool(const nlohmann::json& obj, std::string_view key, bool fallback,
                        std::string_view where) {
  const nlohmann::json* v = JsonField(obj, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean()) return Corrupt("{}: \"{}\" should be true or false", where, key);
  return v->get<bool>();
}

Expected<std::string> JsonString(const nlohmann::json& obj, std::string_view key, std::string_view fallback,
                                 std::string_view where) {
  const nlohmann::json* v = JsonField(obj, key);
  if (v == nullptr || v->is_null()) return std::string(fallback);
  if (!v->is_string()) return Corrupt("{}: \"{}\" should be a string", where, key);
  return v->get<std::string>();
}

std::optional<int64_t> JsonInteger(const nlohmann::json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

const char* JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "number";
    default: return "value";
  }
}

Expected<int32_t> JsonAsInt(const nlohmann::json& value, std::string_view where) {
  // Files written by tools state integers as integers: "4.0" is not one here.
  std::optional<int64_t> i = value.is_number_float() ? std::nullopt : JsonInteger(value);
  if (i && *i >= std::numeric_limits<int32_t>::min() && *i <= std::numeric_limits<int32_t>::max()) {
    return static_cast<int32_t>(*i);
  }
  return Corrupt("{}: should be an integer in 32-bit range", where);
}

Expected<int32_t> JsonInt(const nlohmann::json& obj, std::string_view key, int32_t fallback,
                          std::string_view where) {
  const nlohmann::json* v = JsonField(obj, key);
  if (v == nullptr || v->is_null()) return fallback;
  return JsonAsInt(*v, fmt::format("{}: \"{}\"", where, key));
}

}  // namespace kiln
