// Guarded JSON parsing for tokenizer files.
#include "tokenizer/json_input.h"

#include <limits>

#include "core/mapped_file.h"

namespace kiln {
namespace {

constexpr int kMaxJsonDepth = 128;

// The deepest bracket nesting of `text`, ignoring brackets inside strings.
int NestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
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

Expected<int32_t> JsonAsInt(const nlohmann::json& value, std::string_view where) {
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return static_cast<int32_t>(u);
  } else if (value.is_number_integer()) {
    auto i = value.get<int64_t>();
    if (i >= std::numeric_limits<int32_t>::min() && i <= std::numeric_limits<int32_t>::max()) {
      return static_cast<int32_t>(i);
    }
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
