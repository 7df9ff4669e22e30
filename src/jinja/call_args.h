// Binding call arguments to named parameters the way Python does, for the
// built-in filters, tests, methods and globals.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "jinja/value.h"

namespace kiln::jinja {

// One parameter: a name and, if it is optional, its default.
struct Param {
  std::string_view name;
  std::optional<Value> default_value;
};

// Matches positional and keyword arguments to `params` and fills in
// defaults; errors ("trim() got an unexpected keyword argument 'x'") name
// `callee`. Returns one value per parameter, in order.
Expected<std::vector<Value>> BindArgs(std::string_view callee, const CallArgs& args,
                                      const std::vector<Param>& params);

// An integer argument (bool counts, as in Python), or an error naming it.
Expected<int64_t> IntArg(std::string_view callee, std::string_view name, const Value& v);
// A string argument, or an error naming it.
Expected<std::string> StringArg(std::string_view callee, std::string_view name, const Value& v);

}  // namespace kiln::jinja
