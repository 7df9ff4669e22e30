// Python's str.format (see str_format.h).
#include "jinja/str_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"
#include "jinja/access.h"
#include "jinja/operators.h"
#include "jinja/py_string.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

// A parsed format spec: [[fill]align][sign][#][0][width][,|_][.precision][type].
struct FormatSpec {
  std::string fill = " ";
  char align = 0;
  char sign = '-';
  bool alternate = false;
  int64_t width = 0;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

Expected<FormatSpec> ParseFormatSpec(std::string_view spec) {
  FormatSpec out;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (!spec.empty()) {
    CodePoint first = DecodeCodePoint(spec, 0);
    if (first.size < spec.size() && is_align(spec[first.size])) {
      out.fill = std::string(spec.substr(0, first.size));
      out.align = spec[first.size];
      i = first.size + 1;
    } else if (is_align(spec[0])) {
      out.align = spec[0];
      i = 1;
    }
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) out.sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') {
    out.alternate = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (!out.align) {
      out.fill = "0";
      out.align = '=';
    }
    ++i;
  }
  auto number = [&]() {
    int64_t n = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      n = std::min<int64_t>(n * 10 + (spec[i++] - '0'), 1 << 20);
    }
    return n;
  };
  out.width = number();
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) out.grouping = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    if (i >= spec.size() || spec[i] < '0' || spec[i] > '9') {
      return InvalidArgument("Format specifier missing precision");
    }
    out.precision = number();
  }
  if (i < spec.size()) out.type = spec[i++];
  if (i != spec.size()) return InvalidArgument("Invalid format specifier '{}'", spec);
  return out;
}

std::string Group(std::string digits, char separator) {
  if (!separator) return digits;
  std::string out;
  int count = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    if (count && count % 3 == 0) out += separator;
    out += digits[i];
    ++count;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Expected<std::string> ApplyFormatSpec(Runtime& rt, const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return ToStr(rt, v);
  KILN_ASSIGN_OR_RETURN(FormatSpec spec, ParseFormatSpec(spec_text));
  std::string sign, body;
  bool numeric = false;
  if (v.is_string() && (spec.type == 0 || spec.type == 's')) {
    body = v.as_string();
    if (spec.precision >= 0) {
      std::vector<size_t> offsets = CodePointOffsets(body);
      if (static_cast<size_t>(spec.precision) + 1 < offsets.size()) body.resize(offsets[spec.precision]);
    }
  } else if (v.is_number()) {
    numeric = true;
    char type = spec.type;
    bool as_int = v.is_integral() && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                                      type == 'b' || type == 'n' || type == 'c');
    if (v.is_float() &&
        (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c')) {
      return InvalidArgument("Unknown format code '{}' for object of type 'float'", type);
    }
    if (as_int) {
      int64_t n = v.as_int();
      uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
      if (n < 0) sign = "-";
      switch (type) {
        case 'x':
          body = fmt::format("{:x}", magnitude);
          if (spec.alternate) body = "0x" + body;
          break;
        case 'X':
          body = fmt::format("{:X}", magnitude);
          if (spec.alternate) body = "0X" + body;
          break;
        case 'o':
          body = fmt::format("{:o}", magnitude);
          if (spec.alternate) body = "0o" + body;
          break;
        case 'b':
          body = fmt::format("{:b}", magnitude);
          if (spec.alternate) body = "0b" + body;
          break;
        case 'c':
          if (n < 0 || n > 0x10FFFF || (n >= 0xD800 && n <= 0xDFFF)) {
            return OutOfRange("%c arg not in range(0x110000) or a surrogate");
          }
          sign.clear();
          AppendUtf8(body, static_cast<char32_t>(n));
          break;
        default: body = Group(std::to_string(magnitude), spec.grouping);
      }
    } else {
      double f = v.as_float();
      if (std::signbit(f) && !std::isnan(f)) sign = "-";
      double a = std::fabs(f);
      int64_t precision = std::min<int64_t>(spec.precision < 0 ? 6 : spec.precision, 300);
      char buf[512];
      if (type == 0 && spec.precision < 0) {
        body = FormatPyFloat(a);
      } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' ||
                 type == '%' || type == 0) {
        double x = type == '%' ? a * 100 : a;
        char conv = type == '%' ? 'f' : type == 0 ? 'g' : type;
        std::string fmtstr = fmt::format("%.{}{}", precision == 0 && conv == 'g' ? 1 : precision, conv);
        if (spec.alternate) fmtstr.insert(1, "#");
        std::snprintf(buf, sizeof(buf), fmtstr.c_str(), x);
        body = buf;
        if (type == 0 && body.find_first_of(".en") == std::string::npos) body += ".0";
        if (type == '%') body += '%';
        if (spec.grouping && (conv == 'f')) {
          size_t dot = body.find('.');
          body =
              Group(body.substr(0, dot), spec.grouping) + (dot == std::string::npos ? "" : body.substr(dot));
        }
      } else {
        return InvalidArgument("Unknown format code '{}' for object of type 'float'", type);
      }
    }
    if (sign.empty() && spec.sign == '+') sign = "+";
    if (sign.empty() && spec.sign == ' ') sign = " ";
  } else {
    return InvalidArgument("unsupported format string passed to {}.__format__", TypeName(v));
  }
  size_t length = CodePointCount(sign) + CodePointCount(body);
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(static_cast<size_t>(spec.width) * spec.fill.size()));
  std::string out;
  size_t fill = spec.width > static_cast<int64_t>(length) ? static_cast<size_t>(spec.width) - length : 0;
  char align = spec.align ? spec.align : numeric ? '>' : '<';
  auto repeat = [&](size_t n) {
    for (size_t k = 0; k < n; ++k) out += spec.fill;
  };
  switch (align) {
    case '<':
      out = sign + body;
      repeat(fill);
      break;
    case '>':
      repeat(fill);
      out += sign + body;
      break;
    case '^':
      repeat(fill / 2);
      out += sign + body;
      repeat(fill - fill / 2);
      break;
    case '=':
      out = sign;
      repeat(fill);
      out += body;
      break;
  }
  return out;
}

// One replacement field's value: `name` is "", digits, or an identifier,
// followed by .attr and [key] parts.
Expected<Value> FieldValue(Runtime& rt, std::string_view field, const CallArgs& args, size_t* auto_index,
                           bool* used_auto, bool* used_manual) {
  size_t end = field.find_first_of(".[");
  std::string_view head = field.substr(0, end);
  Value value;
  if (head.empty() || head.find_first_not_of("0123456789") == std::string_view::npos) {
    size_t index;
    if (head.empty()) {
      if (*used_manual) {
        return InvalidArgument("cannot switch from manual field specification to automatic field numbering");
      }
      *used_auto = true;
      index = (*auto_index)++;
    } else {
      if (*used_auto) {
        return InvalidArgument("cannot switch from automatic field numbering to manual field specification");
      }
      *used_manual = true;
      index = head.size() > 9 ? SIZE_MAX : std::stoul(std::string(head));
    }
    if (index >= args.positional.size()) {
      return InvalidArgument("Replacement index {} out of range for positional args tuple", index);
    }
    value = args.positional[index];
  } else {
    auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                           [&](const auto& kw) { return kw.first == head; });
    if (it == args.keyword.end()) return InvalidArgument("KeyError: '{}'", head);
    value = it->second;
  }
  while (end != std::string_view::npos && end < field.size()) {
    if (field[end] == '.') {
      size_t next = field.find_first_of(".[", end + 1);
      std::string_view attr =
          field.substr(end + 1, next == std::string_view::npos ? std::string_view::npos : next - end - 1);
      KILN_ASSIGN_OR_RETURN(value, GetAttr(rt, value, attr));
      end = next;
    } else {
      size_t close = field.find(']', end);
      if (close == std::string_view::npos) return InvalidArgument("Missing ']' in format string");
      std::string_view key = field.substr(end + 1, close - end - 1);
      Value k =
          key.find_first_not_of("0123456789") == std::string_view::npos && !key.empty() && key.size() < 18
              ? Value::Int(std::stoll(std::string(key)))
              : Value::String(std::string(key));
      KILN_ASSIGN_OR_RETURN(value, GetItem(rt, value, k));
      end = close + 1;
    }
  }
  if (value.is_undefined()) return UndefinedError(value);
  return value;
}

}  // namespace

Expected<std::string> PyStrFormat(Runtime& rt, std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return InvalidArgument("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i + 1);
    if (close == std::string_view::npos) return InvalidArgument("expected '}}' before end of string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) {
      return InvalidArgument("nested format fields are not supported");
    }
    std::string_view spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      conversion = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    KILN_ASSIGN_OR_RETURN(Value value, FieldValue(rt, field, args, &auto_index, &used_auto, &used_manual));
    if (!conversion.empty()) {
      if (conversion == "s") {
        KILN_ASSIGN_OR_RETURN(std::string text, ToStr(rt, value));
        value = Value::String(std::move(text));
      } else if (conversion == "r" || conversion == "a") {
        std::string text;
        KILN_RETURN_IF_ERROR(AppendRepr(rt, value, &text));
        value = Value::String(std::move(text));
      } else {
        return InvalidArgument("Unknown conversion specifier {}", conversion);
      }
    }
    KILN_ASSIGN_OR_RETURN(std::string text, ApplyFormatSpec(rt, value, spec));
    out += text;
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
    i = close;
  }
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
  return out;
}

}  // namespace kiln::jinja
