// Attribute, item and slice access with the rules of jinja2's sandbox:
// `obj.name` prefers methods and falls back to items, `obj[key]` the other
// way round, and anything missing is undefined rather than an error.
#pragma once

#include <string_view>

#include "core/status.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace kiln::jinja {

// obj.name. Fails only when obj itself is undefined.
Expected<Value> GetAttr(Runtime& rt, const Value& obj, std::string_view name);

// obj[key]. Fails only when obj itself is undefined.
Expected<Value> GetItem(Runtime& rt, const Value& obj, const Value& key);

// obj[start:stop:step], each bound None or an int. Fails when obj is
// undefined or step is zero; undefined for things that cannot be sliced.
Expected<Value> GetSlice(Runtime& rt, const Value& obj, const Value& start, const Value& stop,
                         const Value& step);

// jinja2's attribute getter for filters (sort(attribute=...), map, ...):
// a dotted path whose parts are looked up as items first; all-digit parts
// are integer indices.
Expected<Value> GetAttributePath(Runtime& rt, const Value& obj, std::string_view path);

}  // namespace kiln::jinja
