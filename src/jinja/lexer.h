// Splits template source into tokens the way jinja2's lexer does with
// trim_blocks and lstrip_blocks on: template text, tag delimiters, and the
// names, literals and operators inside tags, with whitespace control applied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::jinja {

// A 1-based line and column (in bytes) in the template source.
struct SourcePos {
  int line = 1;
  int column = 1;
};

// Prefixes a failed status's message with "line:column: ", the form every
// template error takes; ok statuses and messages that already carry a
// position (from deeper inside the template) pass through unchanged.
Status ErrorAt(SourcePos pos, const Status& status);

enum class TokenKind {
  kData,           // template text between tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,  // text holds the spelling: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenKind kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

// Tokenizes `source`. Like jinja2, newlines are normalized to "\n" and one
// trailing newline is dropped. The last token is always kEof. Errors carry
// the line and column.
Expected<std::vector<Token>> Lex(std::string_view source);

}  // namespace kiln::jinja
