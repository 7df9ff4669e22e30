// Typed field reads with errors that name the field and say what was wrong.
#include "server/json_fields.h"

#include <fmt/format.h>

namespace kiln::server {
namespace {

const nlohmann::json& Null() {
  static const nlohmann::json null;
  return null;
}

}  // namespace

ApiStatus ParseJsonObject(const std::string& text, nlohmann::json* out) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return BadRequest("", "the request body is empty; send a JSON object");
  }
  try {
    *out = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return BadRequest("", fmt::format("the request body is not valid JSON (at byte {})", e.byte));
  } catch (const nlohmann::json::exception& e) {  // a number beyond double's range
    return BadRequest("", fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!out->is_object()) {
    return BadRequest("", fmt::format("the request body must be a JSON object, got {}", JsonTypeName(*out)));
  }
  return std::nullopt;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const nlohmann::json& JsonFields::Get(const char* name) const {
  const nlohmann::json* field = JsonField(object_, name);
  return field != nullptr ? *field : Null();
}

bool JsonFields::Fail(const std::string& name, const std::string& problem) {
  error_ = BadRequest(Path(name), fmt::format("{}: {}", Path(name), problem));
  return false;
}

bool JsonFields::WrongType(const char* name, const char* expected) {
  return Fail(name, fmt::format("expected {}, got {}", expected, JsonTypeName(Get(name))));
}

bool JsonFields::Number(const char* name, double min, double max, std::optional<double>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  if (!v.is_number()) return WrongType(name, "a number");
  double d = v.get<double>();
  if (!(d >= min && d <= max)) return Fail(name, fmt::format("must be in [{}, {}], got {}", min, max, d));
  *out = d;
  return true;
}

bool JsonFields::Integer(const char* name, int64_t min, int64_t max, std::optional<int64_t>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  if (!v.is_number()) return WrongType(name, "an integer");
  std::optional<int64_t> i = JsonInteger(v);
  if (!i) return Fail(name, fmt::format("expected an integer, got {}", v.dump()));
  if (*i < min || *i > max) return Fail(name, fmt::format("must be in [{}, {}], got {}", min, max, *i));
  *out = *i;
  return true;
}

bool JsonFields::Bool(const char* name, std::optional<bool>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  if (!v.is_boolean()) return WrongType(name, "a boolean");
  *out = v.get<bool>();
  return true;
}

bool JsonFields::String(const char* name, std::optional<std::string>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  if (!v.is_string()) return WrongType(name, "a string");
  *out = v.get<std::string>();
  return true;
}

bool JsonFields::StringOrList(const char* name, size_t max_count, std::optional<std::vector<std::string>>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  std::vector<std::string> items;
  if (v.is_string()) {
    items.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > max_count) return Fail(name, fmt::format("at most {} strings are allowed, got {}", max_count, v.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        return Fail(fmt::format("{}[{}]", name, i), fmt::format("expected a string, got {}", JsonTypeName(v[i])));
      }
      items.push_back(v[i].get<std::string>());
    }
  } else {
    return WrongType(name, "a string or a list of strings");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) return Fail(name, "strings must not be empty");
  }
  *out = std::move(items);
  return true;
}

bool JsonFields::IntegerList(const char* name, int64_t min, int64_t max, size_t max_count,
                             std::optional<std::vector<int64_t>>* out) {
  const nlohmann::json& v = Get(name);
  if (v.is_null()) return true;
  if (!v.is_array()) return WrongType(name, "a list of integers");
  if (v.size() > max_count) return Fail(name, fmt::format("at most {} items are allowed, got {}", max_count, v.size()));
  std::vector<int64_t> items;
  items.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    std::optional<int64_t> item = JsonInteger(v[i]);
    std::string path = fmt::format("{}[{}]", name, i);
    if (!item) return Fail(path, fmt::format("expected an integer, got {}", v[i].is_number() ? v[i].dump() : JsonTypeName(v[i])));
    if (*item < min || *item > max) return Fail(path, fmt::format("must be in [{}, {}], got {}", min, max, *item));
    items.push_back(*item);
  }
  *out = std::move(items);
  return true;
}

}  // namespace kiln::server
