// jinja2's built-in tests, the right-hand side of `is`: `x is defined`,
// `x is none`, `n is divisibleby 3`, ...
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace kiln::jinja {

// The test called `name`, or nullptr when there is none.
TestFn FindTest(std::string_view name);

}  // namespace kiln::jinja
