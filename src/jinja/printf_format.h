// Python's printf-style string formatting (`"%s: %d" % (name, n)` and the
// format filter): conversions s r a c d i u x X o e E f F g G with flags,
// width and precision, and %(key)s lookups in a dict.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace kiln::jinja {

// Python's `format % args`: `args` is a tuple, a dict (for %(name)s) or a
// single value. Errors are Python's ("not enough arguments for format
// string").
Expected<std::string> PercentFormat(Runtime& rt, std::string_view format, const Value& args);

}  // namespace kiln::jinja
