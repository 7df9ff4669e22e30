// Builds the syntax tree of a template from its tokens, following jinja2's
// grammar: operator precedence, tests and filters, statements and their end
// tags. Filters and tests are looked up here, so unknown names fail early.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kiln::jinja {

// How deeply blocks and expressions may nest (and how long chains such as
// a.b.c or x|f|g may grow), so that parsing and evaluating never recurse
// without bound.
inline constexpr int kMaxNesting = 100;

// Parses the tokens of one template. REQUIRES: the last token is kEof.
// Errors carry "line:column: ".
Expected<std::unique_ptr<Template>> Parse(std::vector<Token> tokens);

}  // namespace kiln::jinja
