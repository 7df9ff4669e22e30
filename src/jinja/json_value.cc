// JSON to template values (see json_value.h).
#include "jinja/json_value.h"

#include <limits>

#include "core/utf8.h"

namespace kiln::jinja {
namespace {

template <typename Json>
Expected<Value> Convert(const Json& json, int depth) {
  if (depth > kMaxValueDepth) return OutOfRange("JSON nested more than {} levels deep", kMaxValueDepth);
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::None();
    case nlohmann::json::value_t::boolean: return Value::Bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::Int(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return OutOfRange("JSON integer {} does not fit in 64 bits", u);
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::Float(json.template get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = json.template get_ref<const std::string&>();
      if (!IsValidUtf8(s)) return InvalidArgument("JSON string is not valid UTF-8");
      return Value::String(s);
    }
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        KILN_ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1));
        items.push_back(std::move(v));
      }
      return MakeSequence(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictData dict;
      for (auto it = json.begin(); it != json.end(); ++it) {
        if (!IsValidUtf8(it.key())) return InvalidArgument("JSON key is not valid UTF-8");
        KILN_ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        KILN_RETURN_IF_ERROR(dict.Set(Value::String(it.key()), std::move(v)));
      }
      return MakeDict(std::move(dict));
    }
    default: return InvalidArgument("JSON value of type {} has no template equivalent", json.type_name());
  }
}

}  // namespace

Expected<Value> ValueFromJson(const nlohmann::json& json) {
  return Convert(json, 0);
}
Expected<Value> ValueFromJson(const nlohmann::ordered_json& json) {
  return Convert(json, 0);
}

}  // namespace kiln::jinja
