// jinja2's built-in filters (`x | trim`, `tools | tojson(indent=4)`, ...),
// with Hugging Face's tojson, which is json.dumps without ASCII escaping.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace kiln::jinja {

// The filter called `name`, or nullptr when there is none.
FilterFn FindFilter(std::string_view name);

}  // namespace kiln::jinja
