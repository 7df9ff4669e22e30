// Python-style argument binding (see call_args.h).
#include "jinja/call_args.h"

namespace kiln::jinja {

Expected<std::vector<Value>> BindArgs(std::string_view callee, const CallArgs& args,
                                      const std::vector<Param>& params) {
  if (args.positional.size() > params.size()) {
    return InvalidArgument("{}() takes at most {} argument(s) ({} given)", callee, params.size(),
                           args.positional.size());
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    if (i == params.size()) {
      return InvalidArgument("{}() got an unexpected keyword argument '{}'", callee, name);
    }
    if (bound[i]) return InvalidArgument("{}() got multiple values for argument '{}'", callee, name);
    bound[i] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) {
      out.push_back(std::move(*bound[i]));
    } else if (params[i].default_value) {
      out.push_back(*params[i].default_value);
    } else {
      return InvalidArgument("{}() missing required argument '{}'", callee, params[i].name);
    }
  }
  return out;
}

Expected<int64_t> IntArg(std::string_view callee, std::string_view name, const Value& v) {
  if (!v.is_integral()) {
    return InvalidArgument("{}(): argument '{}' must be an integer, not '{}'", callee, name, TypeName(v));
  }
  return v.as_int();
}

Expected<std::string> StringArg(std::string_view callee, std::string_view name, const Value& v) {
  if (!v.is_string()) {
    return InvalidArgument("{}(): argument '{}' must be a string, not '{}'", callee, name, TypeName(v));
  }
  return v.as_string();
}

}  // namespace kiln::jinja
