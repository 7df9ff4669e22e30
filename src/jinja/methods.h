// The methods templates may call on strings, dicts and lists ("a,b".split(","),
// message.get("content"), ...), bound to their receiver as callables.
#pragma once

#include <optional>
#include <string_view>

#include "jinja/value.h"

namespace kiln::jinja {

// The method `name` of `receiver` (a str, dict or list) bound to it; an
// undefined value when jinja2's sandbox refuses the method because it
// would modify the receiver (list.append, dict.pop); nullopt when the type
// has no such method.
std::optional<Value> FindMethod(const Value& receiver, std::string_view name);

}  // namespace kiln::jinja
