// Python's printf-style formatting (see printf_format.h).
#include "jinja/printf_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/utf8.h"
#include "jinja/py_string.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

// One conversion of a printf-style format: %[(key)][flags][width][.prec]type.
struct PercentSpec {
  std::string key;
  bool has_key = false;
  bool left = false, zero = false, plus = false, space = false, alternate = false;
  int width = 0;
  int precision = -1;
  char type = 's';
};

void Pad(const PercentSpec& spec, std::string body, bool numeric, std::string* out) {
  size_t length = CodePointCount(body);
  size_t width = static_cast<size_t>(spec.width);
  if (length >= width) {
    *out += body;
    return;
  }
  size_t fill = width - length;
  if (spec.left) {
    *out += body;
    out->append(fill, ' ');
  } else if (spec.zero && numeric) {
    size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    if (body.compare(sign, 2, "0x") == 0 || body.compare(sign, 2, "0X") == 0 ||
        body.compare(sign, 2, "0o") == 0) {
      sign += 2;
    }
    *out += body.substr(0, sign);
    out->append(fill, '0');
    *out += body.substr(sign);
  } else {
    out->append(fill, ' ');
    *out += body;
  }
}

Expected<std::string> FormatOne(Runtime& rt, const PercentSpec& spec, const Value& v) {
  std::string body;
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      if (spec.type == 's') {
        KILN_ASSIGN_OR_RETURN(body, ToStr(rt, v));
      } else {
        KILN_RETURN_IF_ERROR(AppendRepr(rt, v, &body));
      }
      if (spec.precision >= 0) {
        std::vector<size_t> offsets = CodePointOffsets(body);
        if (static_cast<size_t>(spec.precision) + 1 < offsets.size()) body.resize(offsets[spec.precision]);
      }
      return body;
    }
    case 'c':
      if (v.is_string() && CodePointCount(v.as_string()) == 1) return v.as_string();
      if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF &&
          !(v.as_int() >= 0xD800 && v.as_int() <= 0xDFFF)) {
        std::string s;
        AppendUtf8(s, static_cast<char32_t>(v.as_int()));
        return s;
      }
      return InvalidArgument("%c requires an int or a unicode character");
    default: break;
  }
  if (!v.is_number()) {
    return InvalidArgument("%{} format: a real number is required, not {}", spec.type, TypeName(v));
  }
  std::string flags;
  if (spec.plus) flags += '+';
  if (spec.space) flags += ' ';
  if (spec.alternate) flags += '#';
  char buf[512];
  switch (spec.type) {
    case 'd':
    case 'i':
    case 'u': {
      double f = v.as_float();
      if (v.is_float() && (std::isnan(f) || std::isinf(f))) {
        return InvalidArgument("cannot convert float to integer");
      }
      if (v.is_float() && std::fabs(f) >= 9.2e18) return OutOfRange("integer too large for %d");
      long long n = v.is_float() ? static_cast<long long>(f) : static_cast<long long>(v.as_int());
      std::string fmtstr =
          "%" + flags + (spec.precision >= 0 ? "." + std::to_string(spec.precision) : "") + "lld";
      std::snprintf(buf, sizeof(buf), fmtstr.c_str(), n);
      return std::string(buf);
    }
    case 'x':
    case 'X':
    case 'o': {
      if (!v.is_integral()) {
        return InvalidArgument("%{} format: an integer is required, not float", spec.type);
      }
      long long n = static_cast<long long>(v.as_int());
      unsigned long long magnitude =
          n < 0 ? 0ull - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
      std::string digits = spec.type == 'x'   ? fmt::format("{:x}", magnitude)
                           : spec.type == 'X' ? fmt::format("{:X}", magnitude)
                                              : fmt::format("{:o}", magnitude);
      if (spec.precision > static_cast<int>(digits.size())) {
        digits.insert(0, spec.precision - digits.size(), '0');
      }
      std::string prefix = spec.alternate ? (spec.type == 'o' ? "0o" : spec.type == 'x' ? "0x" : "0X") : "";
      std::string sign = n < 0 ? "-" : spec.plus ? "+" : spec.space ? " " : "";
      return sign + prefix + digits;
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      int precision = spec.precision >= 0 ? std::min(spec.precision, 300) : 6;
      std::string fmtstr = "%" + flags + "." + std::to_string(precision) + spec.type;
      std::snprintf(buf, sizeof(buf), fmtstr.c_str(), v.as_float());
      return std::string(buf);
    }
    default: return InvalidArgument("unsupported format character '{}'", spec.type);
  }
}

}  // namespace

Expected<std::string> PercentFormat(Runtime& rt, std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  if (args.is_list() && args.as_list().kind == SequenceKind::kTuple) {
    positional = args.as_list().items;
  } else {
    if (args.is_dict()) mapping = &args.as_dict();
    positional.push_back(args);
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) return InvalidArgument("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    PercentSpec spec;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string_view::npos) return InvalidArgument("incomplete format key");
      spec.key = std::string(format.substr(i + 1, close - i - 1));
      spec.has_key = true;
      i = close + 1;
    }
    for (; i < format.size() && std::string_view("-0+ #").find(format[i]) != std::string_view::npos; ++i) {
      switch (format[i]) {
        case '-': spec.left = true; break;
        case '0': spec.zero = true; break;
        case '+': spec.plus = true; break;
        case ' ': spec.space = true; break;
        default: spec.alternate = true;
      }
    }
    auto read_number = [&](int* target) -> Status {
      if (i < format.size() && format[i] == '*') {
        if (next_arg >= positional.size() || !positional[next_arg].is_integral()) {
          return InvalidArgument("* wants int");
        }
        *target = static_cast<int>(std::clamp<int64_t>(positional[next_arg++].as_int(), -100000, 100000));
        ++i;
        return Status::Ok();
      }
      int n = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = std::min(n * 10 + (format[i] - '0'), 100000);
        ++i;
      }
      *target = n;
      return Status::Ok();
    };
    KILN_RETURN_IF_ERROR(read_number(&spec.width));
    if (spec.width < 0) {
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      KILN_RETURN_IF_ERROR(read_number(&spec.precision));
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return InvalidArgument("incomplete format");
    spec.type = format[i];
    Value arg;
    if (spec.has_key) {
      if (!mapping) return InvalidArgument("format requires a mapping");
      const Value* found = mapping->FindString(spec.key);
      if (!found) return InvalidArgument("format key '{}' not found", spec.key);
      arg = *found;
      used_mapping = true;
    } else {
      if (next_arg >= positional.size()) return InvalidArgument("not enough arguments for format string");
      arg = positional[next_arg++];
    }
    KILN_ASSIGN_OR_RETURN(std::string body, FormatOne(rt, spec, arg));
    bool numeric = spec.type != 's' && spec.type != 'r' && spec.type != 'a' && spec.type != 'c';
    Pad(spec, std::move(body), numeric, &out);
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
  }
  if (!used_mapping && !mapping && next_arg < positional.size()) {
    return InvalidArgument("not all arguments converted during string formatting");
  }
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
  return out;
}

}  // namespace kiln::jinja
