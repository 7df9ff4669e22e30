// Python's str(), repr() and json.dumps() for template values (see value_text.h).
#include "jinja/value_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "jinja/py_string.h"

namespace kiln::jinja {
namespace {

// Writes values into one string, checking the size limit as it grows.
class Writer {
 public:
  Writer(Runtime& rt, std::string* out) : rt_(rt), out_(out), start_size_(out->size()) {}

  // Charges the bytes written, once the whole value is out.
  Status Finish() { return rt_.Charge(static_cast<int64_t>(out_->size() - start_size_)); }

  Status Repr(const Value& v, int depth) {
    if (depth > kMaxValueDepth) return OutOfRange("value nested more than {} levels deep", kMaxValueDepth);
    KILN_RETURN_IF_ERROR(rt_.CheckStringSize(out_->size()));
    switch (v.kind()) {
      case Value::Kind::kUndefined: *out_ += "Undefined"; break;
      case Value::Kind::kNone: *out_ += "None"; break;
      case Value::Kind::kBool: *out_ += v.as_bool() ? "True" : "False"; break;
      case Value::Kind::kInt: *out_ += std::to_string(v.as_int()); break;
      case Value::Kind::kFloat: *out_ += FormatPyFloat(v.as_float()); break;
      case Value::Kind::kString: AppendPyRepr(v.as_string(), out_); break;
      case Value::Kind::kList: return ReprSequence(v.as_list(), depth);
      case Value::Kind::kDict: return ReprDict(v.as_dict().entries(), depth);
      case Value::Kind::kNamespace: return ReprNamespace(*v.as_namespace(), depth);
      case Value::Kind::kLoop: {
        const LoopState& loop = *v.as_loop();
        fmt::format_to(std::back_inserter(*out_), "<LoopContext {}/{}>", loop.index0 + 1,
                       loop.items->items.size());
        break;
      }
      case Value::Kind::kFunction:
        fmt::format_to(std::back_inserter(*out_), "<function {}>", v.as_function().name);
        break;
    }
    return rt_.CheckStringSize(out_->size());
  }

  Status Str(const Value& v) {
    if (v.is_string()) {
      *out_ += v.as_string();
      return rt_.CheckStringSize(out_->size());
    }
    if (v.is_undefined()) return Status::Ok();
    return Repr(v, 0);
  }

  Status Json(const Value& v, const JsonOptions& options, int level) {
    if (level > kMaxValueDepth) return OutOfRange("value nested more than {} levels deep", kMaxValueDepth);
    KILN_RETURN_IF_ERROR(rt_.CheckStringSize(out_->size()));
    switch (v.kind()) {
      case Value::Kind::kNone: *out_ += "null"; break;
      case Value::Kind::kBool: *out_ += v.as_bool() ? "true" : "false"; break;
      case Value::Kind::kInt: *out_ += std::to_string(v.as_int()); break;
      case Value::Kind::kFloat: JsonFloat(v.as_float()); break;
      case Value::Kind::kString: JsonString(v.as_string()); break;
      case Value::Kind::kList: {
        const ListData& list = v.as_list();
        if (list.kind != SequenceKind::kList && list.kind != SequenceKind::kTuple) return NotSerializable(v);
        if (list.items.empty()) {
          *out_ += "[]";
          break;
        }
        *out_ += '[';
        for (size_t i = 0; i < list.items.size(); ++i) {
          JsonSeparator(options, level + 1, i == 0);
          KILN_RETURN_IF_ERROR(Json(list.items[i], options, level + 1));
        }
        JsonClose(options, level, ']');
        break;
      }
      case Value::Kind::kDict: return JsonDict(v.as_dict(), options, level);
      default: return NotSerializable(v);
    }
    return rt_.CheckStringSize(out_->size());
  }

 private:
  Status ReprSequence(const ListData& list, int depth) {
    const char* open = "[";
    const char* close = "]";
    switch (list.kind) {
      case SequenceKind::kList: break;
      case SequenceKind::kTuple:
        open = "(";
        close = list.items.size() == 1 ? ",)" : ")";
        break;
      case SequenceKind::kRange:
        if (list.range_step == 1) {
          fmt::format_to(std::back_inserter(*out_), "range({}, {})", list.range_start, list.range_stop);
        } else {
          fmt::format_to(std::back_inserter(*out_), "range({}, {}, {})", list.range_start, list.range_stop,
                         list.range_step);
        }
        return Status::Ok();
      case SequenceKind::kGenerator: *out_ += "<generator object>"; return Status::Ok();
      case SequenceKind::kDictKeys:
        open = "dict_keys([";
        close = "])";
        break;
      case SequenceKind::kDictValues:
        open = "dict_values([";
        close = "])";
        break;
      case SequenceKind::kDictItems:
        open = "dict_items([";
        close = "])";
        break;
    }
    *out_ += open;
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i) *out_ += ", ";
      KILN_RETURN_IF_ERROR(rt_.Charge());
      KILN_RETURN_IF_ERROR(Repr(list.items[i], depth + 1));
    }
    *out_ += close;
    return Status::Ok();
  }

  template <typename Entries>
  Status ReprDict(const Entries& entries, int depth) {
    *out_ += '{';
    bool first = true;
    for (const auto& [key, value] : entries) {
      if (!first) *out_ += ", ";
      first = false;
      KILN_RETURN_IF_ERROR(rt_.Charge());
      if constexpr (std::is_same_v<std::decay_t<decltype(key)>, std::string>) {
        AppendPyRepr(key, out_);
      } else {
        KILN_RETURN_IF_ERROR(Repr(key, depth + 1));
      }
      *out_ += ": ";
      KILN_RETURN_IF_ERROR(Repr(value, depth + 1));
    }
    *out_ += '}';
    return Status::Ok();
  }

  Status ReprNamespace(const Namespace& ns, int depth) {
    // Python prints a namespace that contains itself as {...}, the way its
    // dict repr guards against recursion.
    if (std::find(open_namespaces_.begin(), open_namespaces_.end(), &ns) != open_namespaces_.end()) {
      *out_ += "<Namespace {...}>";
      return Status::Ok();
    }
    open_namespaces_.push_back(&ns);
    *out_ += "<Namespace ";
    Status status = ReprDict(ns.attributes(), depth);
    *out_ += '>';
    open_namespaces_.pop_back();
    return status;
  }

  Status NotSerializable(const Value& v) {
    return InvalidArgument("Object of type {} is not JSON serializable", TypeName(v));
  }

  void JsonFloat(double f) {
    if (std::isnan(f)) {
      *out_ += "NaN";
    } else if (std::isinf(f)) {
      *out_ += f > 0 ? "Infinity" : "-Infinity";
    } else {
      *out_ += FormatPyFloat(f);
    }
  }

  void JsonString(std::string_view s) {
    *out_ += '"';
    for (char c : s) {
      switch (c) {
        case '"': *out_ += "\\\""; break;
        case '\\': *out_ += "\\\\"; break;
        case '\n': *out_ += "\\n"; break;
        case '\r': *out_ += "\\r"; break;
        case '\t': *out_ += "\\t"; break;
        case '\b': *out_ += "\\b"; break;
        case '\f': *out_ += "\\f"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(*out_), "\\u{:04x}", static_cast<unsigned>(c));
          } else {
            *out_ += c;
          }
      }
    }
    *out_ += '"';
  }

  // Before an item: the item separator (not before the first) and, when
  // indenting, a newline and the indentation of `level`.
  void JsonSeparator(const JsonOptions& options, int level, bool first) {
    if (!first) *out_ += options.item_separator ? *options.item_separator : (options.indent ? "," : ", ");
    if (options.indent) {
      *out_ += '\n';
      for (int i = 0; i < level; ++i) *out_ += *options.indent;
    }
  }

  void JsonClose(const JsonOptions& options, int level, char close) {
    if (options.indent) {
      *out_ += '\n';
      for (int i = 0; i < level; ++i) *out_ += *options.indent;
    }
    *out_ += close;
  }

  Status JsonKey(const Value& key) {
    switch (key.kind()) {
      case Value::Kind::kString: JsonString(key.as_string()); return Status::Ok();
      case Value::Kind::kNone: *out_ += "\"null\""; return Status::Ok();
      case Value::Kind::kBool: *out_ += key.as_bool() ? "\"true\"" : "\"false\""; return Status::Ok();
      case Value::Kind::kInt: *out_ += '"' + std::to_string(key.as_int()) + '"'; return Status::Ok();
      case Value::Kind::kFloat:
        *out_ += '"';
        JsonFloat(key.as_float());
        *out_ += '"';
        return Status::Ok();
      default: return InvalidArgument("keys must be str, int, float, bool or None, not {}", TypeName(key));
    }
  }

  Status JsonDict(const DictData& dict, const JsonOptions& options, int level) {
    if (dict.size() == 0) {
      *out_ += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(dict.size());
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options.sort_keys) {
      for (const auto* entry : entries) {
        if (!entry->first.is_string()) {
          return InvalidArgument("tojson(sort_keys=True) needs string keys, not {}", TypeName(entry->first));
        }
      }
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return a->first.as_string() < b->first.as_string();
      });
    }
    *out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      JsonSeparator(options, level + 1, i == 0);
      KILN_RETURN_IF_ERROR(JsonKey(entries[i]->first));
      *out_ += options.key_separator;
      KILN_RETURN_IF_ERROR(Json(entries[i]->second, options, level + 1));
    }
    JsonClose(options, level, '}');
    return Status::Ok();
  }

  Runtime& rt_;
  std::string* out_;
  size_t start_size_;
  std::vector<const Namespace*> open_namespaces_;
};

}  // namespace

std::string FormatPyFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that read back as `value`, then laid out by
  // Python's repr rule: positional when the decimal exponent is in
  // (-4, 16], scientific otherwise.
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(result.ptr - buf));
  std::string out;
  if (text.front() == '-') {
    out += '-';
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exponent);
  int point = exponent + 1;  // digits before the decimal point
  int ndigits = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (point >= ndigits) {
      out += digits;
      out.append(static_cast<size_t>(point - ndigits), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point));
      out += '.';
      out += digits.substr(static_cast<size_t>(point));
    }
    return out;
  }
  out += digits[0];
  if (ndigits > 1) {
    out += '.';
    out += digits.substr(1);
  }
  fmt::format_to(std::back_inserter(out), "e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

Status AppendStr(Runtime& rt, const Value& v, std::string* out) {
  Writer writer(rt, out);
  KILN_RETURN_IF_ERROR(writer.Str(v));
  return writer.Finish();
}

Status AppendRepr(Runtime& rt, const Value& v, std::string* out) {
  Writer writer(rt, out);
  KILN_RETURN_IF_ERROR(writer.Repr(v, 0));
  return writer.Finish();
}

Expected<std::string> ToStr(Runtime& rt, const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  KILN_RETURN_IF_ERROR(AppendStr(rt, v, &out));
  return out;
}

Status AppendJson(Runtime& rt, const Value& v, const JsonOptions& options, std::string* out) {
  Writer writer(rt, out);
  KILN_RETURN_IF_ERROR(writer.Json(v, options, 0));
  return writer.Finish();
}

}  // namespace kiln::jinja
