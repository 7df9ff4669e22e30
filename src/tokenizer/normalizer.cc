// Normalization steps. Unicode normal forms come from utf8proc.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/utf8.h"

namespace kiln {
namespace {

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

utf8proc_option_t FormOptions(Normalizer::Form form) {
  switch (form) {
    case Normalizer::Form::kNfc: return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case Normalizer::Form::kNfd: return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case Normalizer::Form::kNfkc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case Normalizer::Form::kNfkd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

// Normalizes well-formed UTF-8; on the (unexpected) failure of utf8proc the
// text is kept as it is.
void AppendNormalForm(std::string_view valid, utf8proc_option_t options, std::string& out) {
  if (valid.empty()) return;
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                    static_cast<utf8proc_ssize_t>(valid.size()), &result, options);
  if (n >= 0 && result != nullptr) {
    out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  } else {
    out.append(valid);
  }
  std::free(result);
}

std::string ApplyUnicodeForm(std::string_view text, Normalizer::Form form) {
  if (IsAscii(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  utf8proc_option_t options = FormOptions(form);
  size_t run_start = 0, i = 0;
  while (i < text.size()) {
    char32_t cp;
    size_t len = DecodeUtf8At(text, i, &cp);
    if (cp == kInvalidCodePoint) {
      AppendNormalForm(text.substr(run_start, i - run_start), options, out);
      out += text[i];
      run_start = i + len;
    }
    i += len;
  }
  AppendNormalForm(text.substr(run_start), options, out);
  return out;
}

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

std::string ReplaceMatches(std::string_view text, const Regex& regex, std::string_view to) {
  std::string out;
  size_t pos = 0;
  regex.ForEachMatch(text, [&](size_t begin, size_t end) {
    out.append(text.substr(pos, begin - pos));
    out.append(to);
    pos = end;
  });
  out.append(text.substr(pos));
  return out;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    size_t len = DecodeUtf8At(text, i, &cp);
    if (cp == kInvalidCodePoint) {
      out += text[i];
    } else {
      AppendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    i += len;
  }
  return out;
}

std::string CollapseSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (c == ' ') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace

void Normalizer::AddUnicodeForm(Form form) {
  steps_.push_back({Kind::kUnicodeForm, form, {}, {}, nullptr});
}
void Normalizer::AddPrepend(std::string prefix) {
  steps_.push_back({Kind::kPrepend, Form::kNfc, {}, std::move(prefix), nullptr});
}
void Normalizer::AddReplace(std::string from, std::string to) {
  steps_.push_back({Kind::kReplace, Form::kNfc, std::move(from), std::move(to), nullptr});
}
void Normalizer::AddReplaceRegex(Regex pattern, std::string to) {
  steps_.push_back({Kind::kReplaceRegex,
                    Form::kNfc,
                    {},
                    std::move(to),
                    std::make_shared<const Regex>(std::move(pattern))});
}
void Normalizer::AddLowercase() {
  steps_.push_back({Kind::kLowercase, Form::kNfc, {}, {}, nullptr});
}
void Normalizer::AddCollapseSpaces() {
  steps_.push_back({Kind::kCollapseSpaces, Form::kNfc, {}, {}, nullptr});
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kUnicodeForm: current = ApplyUnicodeForm(current, step.form); break;
      case Kind::kPrepend:
        if (!current.empty()) current = step.to + current;
        break;
      case Kind::kReplace:
        if (!step.from.empty()) current = ReplaceAll(current, step.from, step.to);
        break;
      case Kind::kReplaceRegex: current = ReplaceMatches(current, *step.regex, step.to); break;
      case Kind::kLowercase: current = Lowercase(current); break;
      case Kind::kCollapseSpaces: current = CollapseSpaces(current); break;
    }
  }
  return current;
}

}  // namespace kiln
