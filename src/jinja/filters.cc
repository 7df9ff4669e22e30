// jinja2's built-in filters (see filters.h). Each follows the jinja2 3.1
// implementation's behaviour, including its quirks (join uses str(), first
// of an empty list is undefined, map/select return generators).
#include "jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "core/utf8.h"
#include "jinja/access.h"
#include "jinja/call_args.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/predicates.h"
#include "jinja/printf_format.h"
#include "jinja/py_string.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

Expected<Value> Generator(std::vector<Value> items) {
  return MakeSequence(std::move(items), SequenceKind::kGenerator);
}

Expected<Value> StringResult(Runtime& rt, std::string s) {
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(s.size()));
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(s.size())));
  return Value::String(std::move(s));
}

// Applies `f` to str(input).
template <std::string (*F)(std::string_view)>
Expected<Value> StringFilter(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("filter", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  return StringResult(rt, F(s));
}

// jinja2's ignore_case: strings compare lower-cased unless case_sensitive.
Value IgnoreCase(const Value& v) {
  return v.is_string() ? Value::String(PyLower(v.as_string())) : v;
}

// The value make_attrgetter would extract: `attribute` is none (the item
// itself), an int index, or a dotted path.
Expected<Value> Extract(Runtime& rt, const Value& item, const Value& attribute) {
  if (attribute.is_none()) return item;
  if (attribute.is_string()) return GetAttributePath(rt, item, attribute.as_string());
  return GetItem(rt, item, attribute);
}

// make_multi_attrgetter: "a,b" gives a tuple of both (for sorting).
Expected<Value> ExtractMulti(Runtime& rt, const Value& item, const Value& attribute, bool case_sensitive) {
  if (!attribute.is_string() || attribute.as_string().find(',') == std::string::npos) {
    KILN_ASSIGN_OR_RETURN(Value v, Extract(rt, item, attribute));
    return case_sensitive ? v : IgnoreCase(v);
  }
  std::vector<Value> keys;
  for (const std::string& part : PySplit(attribute.as_string(), std::string_view(","), -1)) {
    KILN_ASSIGN_OR_RETURN(Value v, Extract(rt, item, Value::String(part)));
    keys.push_back(case_sensitive ? v : IgnoreCase(v));
  }
  return MakeSequence(std::move(keys), SequenceKind::kList);
}

// Sorts `items` by `keys` the way Python's sorted() does: stable, and with
// reverse=True equal items keep their order.
Status SortByKeys(Runtime& rt, std::vector<Value>* items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status failure;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!failure.ok()) return false;
    auto cmp = reverse ? Order(rt, keys[b], keys[a]) : Order(rt, keys[a], keys[b]);
    if (!cmp.ok()) {
      failure = cmp.status();
      return false;
    }
    return *cmp < 0;
  });
  KILN_RETURN_IF_ERROR(failure);
  std::vector<Value> sorted;
  sorted.reserve(items->size());
  for (size_t i : order) sorted.push_back(std::move((*items)[i]));
  *items = std::move(sorted);
  return Status::Ok();
}

// ---- the filters ----

Expected<Value> Abs(Runtime&, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("abs", args, {}).status());
  if (input.is_integral()) {
    if (input.as_int() == INT64_MIN) return OutOfRange("integer result does not fit in 64 bits");
    return Value::Int(std::llabs(input.as_int()));
  }
  if (input.is_float()) return Value::Float(std::fabs(input.as_float()));
  if (input.is_undefined()) return UndefinedError(input);
  return InvalidArgument("bad operand type for abs(): '{}'", TypeName(input));
}

Expected<Value> Attr(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("attr", args, {{"name", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(std::string name, StringArg("attr", "name", bound[0]));
  // Unlike obj.name, attr() never falls back to the dict item.
  if (input.is_dict()) {
    if (auto method = FindMethod(input, name)) return *method;
    return Value::Undefined(fmt::format("'dict object' has no attribute '{}'", name));
  }
  return GetAttr(rt, input, name);
}

Expected<Value> Batch(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("batch", args, {{"linecount", std::nullopt}, {"fill_with", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(int64_t linecount, IntArg("batch", "linecount", bound[0]));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  std::vector<Value> batches, current;
  for (Value& item : items) {
    if (static_cast<int64_t>(current.size()) == linecount) {
      KILN_ASSIGN_OR_RETURN(Value batch, MakeSequence(std::move(current)));
      batches.push_back(std::move(batch));
      current.clear();
    }
    current.push_back(std::move(item));
  }
  if (!current.empty()) {
    if (!bound[1].is_none() && static_cast<int64_t>(current.size()) < linecount) {
      if (linecount > rt.limits().max_loop_iterations) {
        return ResourceExhausted("batch size {} too large", linecount);
      }
      current.resize(static_cast<size_t>(linecount), bound[1]);
    }
    KILN_ASSIGN_OR_RETURN(Value batch, MakeSequence(std::move(current)));
    batches.push_back(std::move(batch));
  }
  return Generator(std::move(batches));
}

Expected<Value> Center(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("center", args, {{"width", Value::Int(80)}}));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  auto method = FindMethod(Value::String(std::move(s)), "center");
  CallArgs inner;
  inner.positional.push_back(bound[0]);
  return method->as_function().call(rt, inner);
}

Expected<Value> LengthFilter(Runtime&, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("length", args, {}).status());
  KILN_ASSIGN_OR_RETURN(int64_t n, Length(input));
  return Value::Int(n);
}

Expected<Value> Default(Runtime&, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("default", args, {{"default_value", Value::String("")}, {"boolean", Value::Bool(false)}}));
  if (input.is_undefined() || (Truthy(bound[1]) && !Truthy(input))) return bound[0];
  return input;
}

Expected<Value> DictSort(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("dictsort", args,
                                             {{"case_sensitive", Value::Bool(false)},
                                              {"by", Value::String("key")},
                                              {"reverse", Value::Bool(false)}}));
  if (!input.is_dict()) return InvalidArgument("dictsort expects a mapping, got '{}'", TypeName(input));
  size_t pos;
  if (bound[1].is_string() && bound[1].as_string() == "key") {
    pos = 0;
  } else if (bound[1].is_string() && bound[1].as_string() == "value") {
    pos = 1;
  } else {
    return InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> pairs, keys;
  for (const auto& [key, value] : input.as_dict().entries()) {
    KILN_ASSIGN_OR_RETURN(Value pair, MakeSequence({key, value}, SequenceKind::kTuple));
    pairs.push_back(std::move(pair));
    const Value& k = pos == 0 ? key : value;
    keys.push_back(Truthy(bound[0]) ? k : IgnoreCase(k));
  }
  KILN_RETURN_IF_ERROR(SortByKeys(rt, &pairs, std::move(keys), Truthy(bound[2])));
  return MakeSequence(std::move(pairs));
}

Expected<Value> Escape(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("escape", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return StringResult(rt, std::move(out));
}

Expected<Value> First(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("first", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Expected<Value> Last(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("last", args, {}).status());
  if (input.is_list() && input.as_list().kind == SequenceKind::kGenerator) {
    return InvalidArgument("'generator' object is not reversible");
  }
  if (input.is_number() || input.is_none()) {
    return InvalidArgument("'{}' object is not reversible", TypeName(input));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

// Python's float(str): optional whitespace and sign, digits with single
// underscores, a fraction and exponent, or inf/infinity/nan.
std::optional<double> ParsePyFloat(std::string_view text) {
  std::string_view s = PyStrip(text, std::nullopt, true, true);
  std::string clean;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
  std::string rest(s.substr(i));
  std::string lower = PyLower(rest);
  if (lower == "inf" || lower == "infinity" || lower == "nan") {
    return std::strtod((clean + lower).c_str(), nullptr);
  }
  bool digits = false, prev_digit = false;
  bool seen_dot = false, seen_exp = false;
  for (size_t k = 0; k < rest.size(); ++k) {
    char c = rest[k];
    if (c >= '0' && c <= '9') {
      clean += c;
      digits = prev_digit = true;
    } else if (c == '_') {
      if (!prev_digit || k + 1 >= rest.size() || rest[k + 1] < '0' || rest[k + 1] > '9') return std::nullopt;
      prev_digit = false;
    } else if (c == '.' && !seen_dot && !seen_exp) {
      clean += c;
      seen_dot = true;
      prev_digit = false;
    } else if ((c == 'e' || c == 'E') && digits && !seen_exp) {
      clean += 'e';
      seen_exp = true;
      prev_digit = false;
      digits = false;
      if (k + 1 < rest.size() && (rest[k + 1] == '+' || rest[k + 1] == '-')) clean += rest[++k];
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// Python's int(str, base): whitespace, sign, optional base prefix, digits
// with single underscores.
std::optional<int64_t> ParsePyInt(std::string_view text, int64_t base) {
  std::string_view s = PyStrip(text, std::nullopt, true, true);
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  auto has_prefix = [&](char p) { return i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == p; };
  bool prefixed = false;
  if (base == 0) {
    base = has_prefix('x') ? 16 : has_prefix('o') ? 8 : has_prefix('b') ? 2 : 10;
    prefixed = base != 10;
  } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) ||
             (base == 2 && has_prefix('b'))) {
    prefixed = true;
  }
  if (base < 2 || base > 36) return std::nullopt;
  if (prefixed) i += 2;
  uint64_t value = 0;
  bool any = false, prev_digit = prefixed;  // an underscore may follow the prefix
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (!prev_digit) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int digit = c >= '0' && c <= '9'                     ? c - '0'
                : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10
                                                         : 99;
    if (digit >= base) return std::nullopt;
    if (value >
        (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(digit)) / static_cast<uint64_t>(base)) {
      return std::nullopt;
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    any = prev_digit = true;
  }
  if (!any || !prev_digit) return std::nullopt;
  return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

Expected<Value> Float(Runtime&, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("float", args, {{"default", Value::Float(0.0)}}));
  if (input.is_undefined()) return UndefinedError(input);
  if (input.is_number()) return Value::Float(input.as_float());
  if (input.is_string()) {
    if (auto f = ParsePyFloat(input.as_string())) return Value::Float(*f);
  }
  return bound[0];
}

Expected<Value> Int(Runtime&, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("int", args, {{"default", Value::Int(0)}, {"base", Value::Int(10)}}));
  if (input.is_undefined()) return UndefinedError(input);
  if (input.is_integral()) return Value::Int(input.as_int());
  // int(float) fails for NaN with a ValueError, which jinja2 turns into the
  // default, but for infinity with an OverflowError, which it lets through.
  auto from_float = [&](double f) -> Expected<Value> {
    if (std::isnan(f)) return bound[0];
    if (std::isinf(f)) return OutOfRange("cannot convert float infinity to integer");
    if (std::fabs(f) >= 9.2e18) return OutOfRange("integer {} does not fit in 64 bits", f);
    return Value::Int(static_cast<int64_t>(f));
  };
  if (input.is_float()) return from_float(input.as_float());
  if (input.is_string()) {
    if (bound[1].is_integral()) {
      if (auto i = ParsePyInt(input.as_string(), bound[1].as_int())) return Value::Int(*i);
    }
    // jinja2's quirk: "42.23"|int is 42, through float.
    if (auto f = ParsePyFloat(input.as_string())) return from_float(*f);
  }
  return bound[0];
}

Expected<Value> Format(Runtime& rt, const Value& input, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return InvalidArgument("can't handle positional and keyword arguments at the same time");
  }
  KILN_ASSIGN_OR_RETURN(std::string format, ToStr(rt, input));
  Value values;
  if (!args.keyword.empty()) {
    DictData dict;
    for (const auto& [key, value] : args.keyword) KILN_RETURN_IF_ERROR(dict.Set(Value::String(key), value));
    KILN_ASSIGN_OR_RETURN(values, MakeDict(std::move(dict)));
  } else {
    KILN_ASSIGN_OR_RETURN(values, MakeSequence(args.positional, SequenceKind::kTuple));
  }
  KILN_ASSIGN_OR_RETURN(std::string out, PercentFormat(rt, format, values));
  return Value::String(std::move(out));
}

Expected<Value> Indent(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("indent", args,
               {{"width", Value::Int(4)}, {"first", Value::Bool(false)}, {"blank", Value::Bool(false)}}));
  std::string indention;
  if (bound[0].is_string()) {
    indention = bound[0].as_string();
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t width, IntArg("indent", "width", bound[0]));
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(static_cast<size_t>(std::max<int64_t>(width, 0))));
    indention.assign(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  }
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  s += "\n";  // jinja2 appends a newline so that splitlines keeps a trailing empty line
  KILN_RETURN_IF_ERROR(rt.Charge(kValueCost * static_cast<int64_t>(PySplitLinesCount(s))));
  std::vector<std::string> lines = PySplitLines(s, false);
  if (lines.size() * indention.size() > rt.limits().max_output_bytes) {
    return rt.CheckStringSize(lines.size() * indention.size());
  }
  std::string out;
  if (Truthy(bound[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (Truthy(bound[1])) out = indention + out;
  return StringResult(rt, std::move(out));
}

Expected<Value> Items(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("items", args, {}).status());
  if (input.is_undefined()) return Generator({});
  if (!input.is_dict()) return InvalidArgument("Can only get item pairs from a mapping.");
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(input.as_dict().size())));
  std::vector<Value> pairs;
  for (const auto& [key, value] : input.as_dict().entries()) {
    KILN_ASSIGN_OR_RETURN(Value pair, MakeSequence({key, value}, SequenceKind::kTuple));
    pairs.push_back(std::move(pair));
  }
  return Generator(std::move(pairs));
}

Expected<Value> Join(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("join", args, {{"d", Value::String("")}, {"attribute", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  KILN_ASSIGN_OR_RETURN(std::string separator, ToStr(rt, bound[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    KILN_ASSIGN_OR_RETURN(Value item, Extract(rt, items[i], bound[1]));
    KILN_RETURN_IF_ERROR(AppendStr(rt, item, &out));
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
  }
  return StringResult(rt, std::move(out));
}

Expected<Value> List(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("list", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  return MakeSequence(std::move(items));
}

Expected<Value> Map(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  std::vector<Value> out;
  out.reserve(items.size());
  if (args.positional.empty()) {
    Value attribute, fallback = Value::None();
    bool has_attribute = false;
    for (const auto& [key, value] : args.keyword) {
      if (key == "attribute") {
        attribute = value;
        has_attribute = true;
      } else if (key == "default") {
        fallback = value;
      } else {
        return InvalidArgument("Unexpected keyword argument '{}'", key);
      }
    }
    if (!has_attribute) return InvalidArgument("map requires a filter argument");
    for (const Value& item : items) {
      KILN_ASSIGN_OR_RETURN(Value v, Extract(rt, item, attribute));
      if (v.is_undefined() && !fallback.is_none()) v = fallback;
      out.push_back(std::move(v));
    }
    return Generator(std::move(out));
  }
  if (!args.positional[0].is_string()) return InvalidArgument("map: the filter name must be a string");
  const std::string& name = args.positional[0].as_string();
  FilterFn filter = FindFilter(name);
  if (!filter) return InvalidArgument("No filter named '{}'.", name);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(rt.Charge());
    KILN_ASSIGN_OR_RETURN(Value v, filter(rt, item, rest));
    out.push_back(std::move(v));
  }
  return Generator(std::move(out));
}

Expected<Value> MinMax(Runtime& rt, const Value& input, const CallArgs& args, bool want_max) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs(want_max ? "max" : "min", args,
                                 {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value key, Extract(rt, items[i], bound[1]));
    if (!Truthy(bound[0])) key = IgnoreCase(key);
    if (i == 0) {
      best_key = std::move(key);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int cmp, Order(rt, key, best_key));
    if (want_max ? cmp > 0 : cmp < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Expected<Value> Max(Runtime& rt, const Value& input, const CallArgs& args) {
  return MinMax(rt, input, args, true);
}
Expected<Value> Min(Runtime& rt, const Value& input, const CallArgs& args) {
  return MinMax(rt, input, args, false);
}

// select/reject/selectattr/rejectattr.
Expected<Value> SelectOrReject(Runtime& rt, const Value& input, const CallArgs& args, bool select,
                               bool by_attr) {
  if (!Truthy(input)) return Generator({});
  size_t next = 0;
  Value attribute = Value::None();
  if (by_attr) {
    if (args.positional.empty()) return InvalidArgument("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  TestFn test = nullptr;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return InvalidArgument("the test name must be a string");
    test = FindTest(args.positional[next].as_string());
    if (!test) return InvalidArgument("No test named '{}'.", args.positional[next].as_string());
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next) + 1,
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  std::vector<Value> out;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(rt.Charge());
    KILN_ASSIGN_OR_RETURN(Value subject, Extract(rt, item, attribute));
    bool passed;
    if (test) {
      KILN_ASSIGN_OR_RETURN(passed, test(rt, subject, test_args));
    } else {
      passed = Truthy(subject);
    }
    if (passed == select) out.push_back(item);
  }
  return Generator(std::move(out));
}

Expected<Value> Select(Runtime& rt, const Value& input, const CallArgs& args) {
  return SelectOrReject(rt, input, args, true, false);
}
Expected<Value> Reject(Runtime& rt, const Value& input, const CallArgs& args) {
  return SelectOrReject(rt, input, args, false, false);
}
Expected<Value> SelectAttr(Runtime& rt, const Value& input, const CallArgs& args) {
  return SelectOrReject(rt, input, args, true, true);
}
Expected<Value> RejectAttr(Runtime& rt, const Value& input, const CallArgs& args) {
  return SelectOrReject(rt, input, args, false, true);
}

Expected<Value> Replace(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  KILN_ASSIGN_OR_RETURN(std::string old_text, ToStr(rt, bound[0]));
  KILN_ASSIGN_OR_RETURN(std::string new_text, ToStr(rt, bound[1]));
  CallArgs inner;
  inner.positional = {Value::String(std::move(old_text)), Value::String(std::move(new_text))};
  if (!bound[2].is_none()) inner.positional.push_back(bound[2]);
  auto method = FindMethod(Value::String(std::move(s)), "replace");
  return method->as_function().call(rt, inner);
}

Expected<Value> Reverse(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("reverse", args, {}).status());
  if (input.is_string()) {
    const std::string& s = input.as_string();
    std::string out;
    out.reserve(s.size());
    for (size_t end = s.size(); end > 0;) {
      // Step back to the start of the code point that ends at `end`.
      size_t start = end - 1;
      while (start > 0 && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
      if (start + DecodeCodePoint(s, start).size != end) start = end - 1;
      out.append(s, start, end - start);
      end = start;
    }
    return StringResult(rt, std::move(out));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  std::reverse(items.begin(), items.end());
  // reversed() of a list is an iterator; a generator is first turned into
  // a list, so jinja2 returns a real list for it.
  bool was_generator = input.is_list() && input.as_list().kind == SequenceKind::kGenerator;
  return MakeSequence(std::move(items), was_generator ? SequenceKind::kList : SequenceKind::kGenerator);
}

// Python's round(x, ndigits): correctly rounded, ties to even.
double PyRound(double x, int64_t ndigits) {
  if (std::isnan(x) || std::isinf(x)) return x;
  if (ndigits > 320) return x;
  if (ndigits < -320) return std::copysign(0.0, x);
  if (ndigits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-ndigits));
  double y = x / scale;
  double r = std::nearbyint(y);
  return r * scale;
}

Expected<Value> Round(Runtime&, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("round", args, {{"precision", Value::Int(0)}, {"method", Value::String("common")}}));
  KILN_ASSIGN_OR_RETURN(int64_t precision, IntArg("round", "precision", bound[0]));
  std::string method = bound[1].is_string() ? bound[1].as_string() : "";
  if (method != "common" && method != "ceil" && method != "floor") {
    return InvalidArgument("method must be common, ceil or floor");
  }
  if (input.is_undefined()) return UndefinedError(input);
  if (!input.is_number()) return InvalidArgument("type {} doesn't define __round__ method", TypeName(input));
  if (method == "common") {
    if (input.is_integral()) {
      if (precision >= 0) return Value::Int(input.as_int());
      return Value::Int(static_cast<int64_t>(PyRound(static_cast<double>(input.as_int()), precision)));
    }
    return Value::Float(PyRound(input.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = input.as_float() * scale;
  double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  // math.ceil/floor return ints, so an int divided by 10**precision.
  return Value::Float(precision >= 0 ? r / scale : r / scale);
}

Expected<Value> Safe(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("safe", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  return Value::String(std::move(s));
}

Expected<Value> Slice(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("slice", args, {{"slices", std::nullopt}, {"fill_with", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(int64_t slices, IntArg("slice", "slices", bound[0]));
  if (slices == 0) return InvalidArgument("integer division or modulo by zero");
  KILN_ASSIGN_OR_RETURN(std::vector<Value> seq, IterItems(rt, input));
  int64_t length = static_cast<int64_t>(seq.size());
  if (slices < 0) return Generator({});
  if (slices > rt.limits().max_loop_iterations) return ResourceExhausted("slice count {} too large", slices);
  int64_t per = length / slices, extra = length % slices, offset = 0;
  std::vector<Value> out;
  for (int64_t n = 0; n < slices; ++n) {
    KILN_RETURN_IF_ERROR(rt.Charge());
    int64_t start = offset + n * per;
    if (n < extra) ++offset;
    int64_t end = offset + (n + 1) * per;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!bound[1].is_none() && n >= extra) part.push_back(bound[1]);
    KILN_ASSIGN_OR_RETURN(Value v, MakeSequence(std::move(part)));
    out.push_back(std::move(v));
  }
  return Generator(std::move(out));
}

Expected<Value> Sort(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("sort", args,
                                             {{"reverse", Value::Bool(false)},
                                              {"case_sensitive", Value::Bool(false)},
                                              {"attribute", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value key, ExtractMulti(rt, item, bound[2], Truthy(bound[1])));
    keys.push_back(std::move(key));
  }
  KILN_RETURN_IF_ERROR(SortByKeys(rt, &items, std::move(keys), Truthy(bound[0])));
  return MakeSequence(std::move(items));
}

Expected<Value> String(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("string", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  return Value::String(std::move(s));
}

Expected<Value> Sum(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("sum", args, {{"attribute", Value::None()}, {"start", Value::Int(0)}}));
  if (bound[1].is_string()) return InvalidArgument("sum() can't sum strings [use ''.join(seq) instead]");
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  Value total = bound[1];
  for (const Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value v, Extract(rt, item, bound[0]));
    KILN_ASSIGN_OR_RETURN(total, ApplyBinary(rt, BinaryOp::kAdd, total, v));
  }
  return total;
}

Expected<Value> ToJson(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("tojson", args,
                                             {{"indent", Value::None()},
                                              {"separators", Value::None()},
                                              {"sort_keys", Value::Bool(false)}}));
  JsonOptions options;
  if (bound[0].is_string()) {
    options.indent = bound[0].as_string();
  } else if (bound[0].is_integral()) {
    int64_t n = bound[0].as_int();
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(static_cast<size_t>(std::max<int64_t>(n, 0))));
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
  } else if (!bound[0].is_none()) {
    return InvalidArgument("tojson: indent must be an int or a string, not {}", TypeName(bound[0]));
  }
  if (!bound[1].is_none()) {
    const Value& sep = bound[1];
    if (!sep.is_list() || sep.as_list().items.size() != 2 || !sep.as_list().items[0].is_string() ||
        !sep.as_list().items[1].is_string()) {
      return InvalidArgument("tojson: separators must be a pair of strings");
    }
    options.item_separator = sep.as_list().items[0].as_string();
    options.key_separator = sep.as_list().items[1].as_string();
  }
  options.sort_keys = Truthy(bound[2]);
  std::string out;
  KILN_RETURN_IF_ERROR(AppendJson(rt, input, options, &out));
  return Value::String(std::move(out));
}

Expected<Value> Trim(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("trim", args, {{"chars", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  std::optional<std::string_view> chars;
  if (bound[0].is_string()) {
    chars = bound[0].as_string();
  } else if (!bound[0].is_none()) {
    return InvalidArgument("strip arg must be None or str");
  }
  return Value::String(std::string(PyStrip(s, chars, true, true)));
}

Expected<Value> Truncate(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("truncate", args,
                                             {{"length", Value::Int(255)},
                                              {"killwords", Value::Bool(false)},
                                              {"end", Value::String("...")},
                                              {"leeway", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(int64_t length, IntArg("truncate", "length", bound[0]));
  KILN_ASSIGN_OR_RETURN(std::string end, StringArg("truncate", "end", bound[2]));
  int64_t leeway = 5;
  if (!bound[3].is_none()) {
    KILN_ASSIGN_OR_RETURN(leeway, IntArg("truncate", "leeway", bound[3]));
  }
  int64_t end_length = static_cast<int64_t>(CodePointCount(end));
  if (length < end_length) return InvalidArgument("expected length >= {}, got {}", end_length, length);
  if (leeway < 0) return InvalidArgument("expected leeway >= 0, got {}", leeway);
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  std::vector<size_t> offsets = CodePointOffsets(s);
  int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  if (n <= length + leeway) return Value::String(std::move(s));
  std::string head = s.substr(0, offsets[static_cast<size_t>(length - end_length)]);
  if (Truthy(bound[1])) return Value::String(head + end);
  size_t space = head.rfind(' ');
  if (space != std::string::npos) head.resize(space);
  return Value::String(head + end);
}

Expected<Value> Unique(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("unique", args, {{"case_sensitive", Value::Bool(false)}, {"attribute", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, input));
  std::unordered_set<std::string> seen_strings;
  std::vector<Value> seen_others, out;
  for (const Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value key, Extract(rt, item, bound[1]));
    if (!Truthy(bound[0])) key = IgnoreCase(key);
    if (!IsHashable(key)) return InvalidArgument("unhashable type: '{}'", TypeName(key));
    bool fresh;
    if (key.is_string()) {
      fresh = seen_strings.insert(key.as_string()).second;
    } else {
      fresh = true;
      for (const Value& other : seen_others) {
        KILN_RETURN_IF_ERROR(rt.Charge());
        if (KeysEqual(other, key)) {
          fresh = false;
          break;
        }
      }
      if (fresh) seen_others.push_back(key);
    }
    if (fresh) out.push_back(item);
  }
  return Generator(std::move(out));
}

bool IsWordChar(char32_t c) {
  if (c == '_') return true;
  std::string s;
  AppendUtf8(s, c);
  return PyIsAlnum(s);
}

Expected<Value> WordCount(Runtime& rt, const Value& input, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(BindArgs("wordcount", args, {}).status());
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, input));
  int64_t words = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    CodePoint cp = DecodeCodePoint(s, pos);
    bool word = IsWordChar(cp.value);
    if (word && !in_word) ++words;
    in_word = word;
    pos += cp.size;
  }
  return Value::Int(words);
}

// jinja2's title filter: upper-case the first character after each run of
// whitespace, '-', '(', '{', '[' or '<'; lower-case the rest.
std::string TitleWords(std::string_view s) {
  std::string out;
  bool start = true;
  for (size_t pos = 0; pos < s.size();) {
    CodePoint cp = DecodeCodePoint(s, pos);
    std::string_view c = s.substr(pos, cp.size);
    bool boundary = IsPySpace(cp.value) || c == "-" || c == "(" || c == "{" || c == "[" || c == "<";
    if (boundary) {
      out += c;
      start = true;
    } else {
      out += start ? PyUpper(c) : PyLower(c);
      start = false;
    }
    pos += cp.size;
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  return PyCapitalize(s);
}
std::string Lower(std::string_view s) {
  return PyLower(s);
}
std::string Upper(std::string_view s) {
  return PyUpper(s);
}

struct Entry {
  std::string_view name;
  FilterFn fn;
};

const Entry kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"batch", Batch},
    {"capitalize", StringFilter<Capitalize>},
    {"center", Center},
    {"count", LengthFilter},
    {"d", Default},
    {"default", Default},
    {"dictsort", DictSort},
    {"e", Escape},
    {"escape", Escape},
    {"first", First},
    {"float", Float},
    {"forceescape", Escape},
    {"format", Format},
    {"indent", Indent},
    {"int", Int},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", LengthFilter},
    {"list", List},
    {"lower", StringFilter<Lower>},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"replace", Replace},
    {"reverse", Reverse},
    {"round", Round},
    {"safe", Safe},
    {"select", Select},
    {"selectattr", SelectAttr},
    {"slice", Slice},
    {"sort", Sort},
    {"string", String},
    {"sum", Sum},
    {"title", StringFilter<TitleWords>},
    {"tojson", ToJson},
    {"trim", Trim},
    {"truncate", Truncate},
    {"unique", Unique},
    {"upper", StringFilter<Upper>},
    {"wordcount", WordCount},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const Entry& entry : kFilters) {
    if (entry.name == name) return entry.fn;
  }
  return nullptr;
}

}  // namespace kiln::jinja
