// Escaping for generated GBNF.
#include "grammar/gbnf_text.h"

#include <fmt/format.h>

#include "core/utf8.h"

namespace kiln {
namespace {

void AppendEscaped(std::string& out, char32_t cp, bool in_class) {
  switch (cp) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\t': out += "\\t"; return;
    case '\r': out += "\\r"; return;
    default: break;
  }
  if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^')) {
    out.push_back('\\');
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x20 || cp == 0x7F) {
    out += fmt::format("\\x{:02X}", static_cast<uint32_t>(cp));
  } else {
    AppendUtf8(out, cp);
  }
}

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    size_t n = DecodeUtf8At(text, i, &cp);
    if (cp == kInvalidCodePoint) cp = 0xFFFD;  // callers pass valid UTF-8 (JSON text)
    AppendEscaped(out, cp, false);
    i += n;
  }
  out += "\"";
  return out;
}

std::string GbnfClassChar(char32_t cp) {
  std::string out;
  AppendEscaped(out, cp, true);
  return out;
}

std::string GbnfRuleName(std::string_view name) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '-');
  }
  if (out.empty()) out = "x";
  return out;
}

}  // namespace kiln
