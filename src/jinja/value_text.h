// Values as text, byte for byte the way Python writes them: str() for what
// `{{ x }}` prints, repr() inside lists and dicts, and json.dumps() for the
// tojson filter.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace kiln::jinja {

// Python's repr() of a float ("1.0", "1e+16", "0.1", "inf", "nan").
std::string FormatPyFloat(double value);

// Appends str(v): strings as they are, undefined as nothing, everything
// else as repr(). Fails past the runtime's size limits.
Status AppendStr(Runtime& rt, const Value& v, std::string* out);
// Appends repr(v).
Status AppendRepr(Runtime& rt, const Value& v, std::string* out);
// str(v) as a new string.
Expected<std::string> ToStr(Runtime& rt, const Value& v);

// json.dumps() options, as the Hugging Face tojson filter passes them.
struct JsonOptions {
  std::optional<std::string> indent;          // nullopt: everything on one line
  std::optional<std::string> item_separator;  // default ", " (or "," with indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Appends json.dumps(v, ensure_ascii=False, ...). Fails for values JSON
// cannot hold (undefined, namespaces, ...) as Python does.
Status AppendJson(Runtime& rt, const Value& v, const JsonOptions& options, std::string* out);

}  // namespace kiln::jinja
