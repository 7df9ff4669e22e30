// Python's str.format(): replacement fields {}, {0}, {name} with .attr and
// [key] lookups, !r/!s conversions, and the format-spec mini-language
// ([[fill]align][sign][#][0][width][,][.precision][type]).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace kiln::jinja {

// `format`.format(*args.positional, **args.keyword), with Python's results
// and errors ("Replacement index 1 out of range ...").
Expected<std::string> PyStrFormat(Runtime& rt, std::string_view format, const CallArgs& args);

}  // namespace kiln::jinja
