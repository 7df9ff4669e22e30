// Methods of str, dict and list values, with Python's results (see methods.h).
#include "jinja/methods.h"

#include <fmt/format.h>

#include <algorithm>

#include "jinja/call_args.h"
#include "jinja/operators.h"
#include "jinja/py_string.h"
#include "jinja/runtime.h"
#include "jinja/str_format.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

using Method = Expected<Value> (*)(Runtime& rt, const Value& self, const CallArgs& args);

Value Bind(const Value& self, std::string name, Method method) {
  auto fn = std::make_shared<Function>();
  fn->name = std::move(name);
  fn->call = [self, method](Runtime& rt, const CallArgs& args) { return method(rt, self, args); };
  return Value::FromFunction(std::move(fn));
}

Value Unsafe(const Value& self, std::string_view name) {
  return Value::Undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, TypeName(self)));
}

Expected<Value> StringList(const std::vector<std::string>& parts, SequenceKind kind = SequenceKind::kList) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const std::string& part : parts) items.push_back(Value::String(part));
  return MakeSequence(std::move(items), kind);
}

// An optional `chars` argument: None means whitespace.
Expected<std::optional<std::string_view>> CharsArg(std::string_view method, const Value& v) {
  if (v.is_none()) return std::optional<std::string_view>();
  if (!v.is_string()) return InvalidArgument("{} arg must be None or str", method);
  return std::optional<std::string_view>(v.as_string());
}

// An optional start/end index argument.
Expected<std::optional<int64_t>> IndexArg(std::string_view method, const Value& v) {
  if (v.is_none()) return std::optional<int64_t>();
  if (!v.is_integral()) return InvalidArgument("slice indices must be integers or None");
  return std::optional<int64_t>(v.as_int());
}

// The byte range of code points [start, end) of s after Python's clamping.
Expected<std::pair<size_t, size_t>> ByteRange(std::string_view method, const std::string& s,
                                              const Value& start, const Value& end) {
  KILN_ASSIGN_OR_RETURN(auto lo, IndexArg(method, start));
  KILN_ASSIGN_OR_RETURN(auto hi, IndexArg(method, end));
  if (!lo && !hi) return std::pair<size_t, size_t>(0, s.size());
  std::vector<size_t> offsets = CodePointOffsets(s);
  int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  PyClampRange(n, &lo, &hi);
  if (*hi < *lo) return std::pair<size_t, size_t>(1, 0);  // empty, and nothing matches in it
  return std::pair<size_t, size_t>(offsets[*lo], offsets[*hi]);
}

Expected<Value> StrStrip(Runtime&, const Value& self, const CallArgs& args, std::string_view name, bool left,
                         bool right) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs(name, args, {{"chars", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(auto chars, CharsArg(name, bound[0]));
  return Value::String(std::string(PyStrip(self.as_string(), chars, left, right)));
}

Expected<Value> StrSplit(Runtime& rt, const Value& self, const CallArgs& args, bool from_right) {
  std::string_view name = from_right ? "rsplit" : "split";
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs(name, args, {{"sep", Value::None()}, {"maxsplit", Value::Int(-1)}}));
  KILN_ASSIGN_OR_RETURN(auto sep, CharsArg(name, bound[0]));
  if (sep && sep->empty()) return InvalidArgument("empty separator");
  KILN_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(name, "maxsplit", bound[1]));
  const std::string& s = self.as_string();
  size_t pieces = PySplitCount(s, sep, maxsplit);
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(s.size()) + kValueCost * static_cast<int64_t>(pieces)));
  return StringList(from_right ? PyRSplit(s, sep, maxsplit) : PySplit(s, sep, maxsplit));
}

Expected<Value> StrAffix(Runtime&, const Value& self, const CallArgs& args, bool at_start) {
  std::string_view name = at_start ? "startswith" : "endswith";
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs(name, args, {{"prefix", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}}));
  const std::string& s = self.as_string();
  KILN_ASSIGN_OR_RETURN(auto range, ByteRange(name, s, bound[1], bound[2]));
  if (range.first > range.second) return Value::Bool(false);
  std::string_view text = std::string_view(s).substr(range.first, range.second - range.first);
  std::vector<std::string_view> candidates;
  const Value& affix = bound[0];
  if (affix.is_string()) {
    candidates.push_back(affix.as_string());
  } else if (affix.is_list() && affix.as_list().kind == SequenceKind::kTuple) {
    for (const Value& item : affix.as_list().items) {
      if (!item.is_string()) {
        return InvalidArgument("tuple for {} must only contain str, not {}", name, TypeName(item));
      }
      candidates.push_back(item.as_string());
    }
  } else {
    return InvalidArgument("{} first arg must be str or a tuple of str, not {}", name, TypeName(affix));
  }
  for (std::string_view c : candidates) {
    bool hit = at_start ? text.substr(0, c.size()) == c
                        : text.size() >= c.size() && text.substr(text.size() - c.size()) == c;
    if (hit) return Value::Bool(true);
  }
  return Value::Bool(false);
}

Expected<Value> StrFind(Runtime&, const Value& self, const CallArgs& args, std::string_view name,
                        bool from_right, bool raise) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs(name, args, {{"sub", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::string sub, StringArg(name, "sub", bound[0]));
  const std::string& s = self.as_string();
  KILN_ASSIGN_OR_RETURN(auto range, ByteRange(name, s, bound[1], bound[2]));
  size_t hit = std::string::npos;
  if (range.first <= range.second) {
    std::string_view text = std::string_view(s).substr(range.first, range.second - range.first);
    size_t local = from_right ? text.rfind(sub) : text.find(sub);
    if (local != std::string_view::npos) hit = range.first + local;
  }
  if (hit == std::string::npos) {
    if (raise) return InvalidArgument("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(static_cast<int64_t>(CodePointCount(std::string_view(s).substr(0, hit))));
}

Expected<Value> StrCount(Runtime&, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("count", args, {{"sub", std::nullopt}, {"start", Value::None()}, {"end", Value::None()}}));
  KILN_ASSIGN_OR_RETURN(std::string sub, StringArg("count", "sub", bound[0]));
  const std::string& s = self.as_string();
  KILN_ASSIGN_OR_RETURN(auto range, ByteRange("count", s, bound[1], bound[2]));
  if (range.first > range.second) return Value::Int(0);
  std::string_view text = std::string_view(s).substr(range.first, range.second - range.first);
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(text)) + 1);
  int64_t count = 0;
  for (size_t pos = text.find(sub); pos != std::string_view::npos; pos = text.find(sub, pos + sub.size())) {
    ++count;
  }
  return Value::Int(count);
}

Expected<Value> StrReplace(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(
      auto bound,
      BindArgs("replace", args, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::Int(-1)}}));
  KILN_ASSIGN_OR_RETURN(std::string old_text, StringArg("replace", "old", bound[0]));
  KILN_ASSIGN_OR_RETURN(std::string new_text, StringArg("replace", "new", bound[1]));
  KILN_ASSIGN_OR_RETURN(int64_t count, IntArg("replace", "count", bound[2]));
  const std::string& s = self.as_string();
  // Bound the result before building it: each replacement adds at most
  // new_text bytes.
  size_t replacements = old_text.empty() ? CodePointCount(s) + 1 : s.size() / old_text.size();
  if (count >= 0) replacements = std::min<size_t>(replacements, static_cast<size_t>(count));
  if (new_text.size() > old_text.size() &&
      replacements > (rt.limits().max_output_bytes + 1) / (new_text.size() - old_text.size())) {
    std::string out =
        PyReplace(s, old_text, new_text,
                  std::min<int64_t>(count < 0 ? INT64_MAX : count, static_cast<int64_t>(replacements)));
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
    return Value::String(std::move(out));
  }
  std::string out = PyReplace(s, old_text, new_text, count);
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

Expected<Value> StrJoin(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("join", args, {{"iterable", std::nullopt}}));
  const Value& iterable = bound[0];
  if (!iterable.is_list() && !iterable.is_string() && !iterable.is_dict()) {
    return InvalidArgument("can only join an iterable");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, IterItems(rt, iterable));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return InvalidArgument("sequence item {}: expected str instance, {} found", i, TypeName(items[i]));
    }
    if (i) out += self.as_string();
    out += items[i].as_string();
    KILN_RETURN_IF_ERROR(rt.CheckStringSize(out.size()));
  }
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

Expected<Value> StrJustify(Runtime& rt, const Value& self, const CallArgs& args, std::string_view name) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs(name, args, {{"width", std::nullopt}, {"fillchar", Value::String(" ")}}));
  KILN_ASSIGN_OR_RETURN(int64_t width, IntArg(name, "width", bound[0]));
  KILN_ASSIGN_OR_RETURN(std::string fill, StringArg(name, "fillchar", bound[1]));
  if (CodePointCount(fill) != 1) {
    return InvalidArgument("The fill character must be exactly one character long");
  }
  const std::string& s = self.as_string();
  int64_t length = static_cast<int64_t>(CodePointCount(s));
  if (width <= length) return self;
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(static_cast<size_t>(width) * fill.size()));
  int64_t total = width - length, left = 0;
  if (name == "rjust") left = total;
  if (name == "center") left = total / 2 + (total & width & 1);  // CPython's centering rule
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < total; ++i) out += fill;
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

Expected<Value> StrZfill(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("zfill", args, {{"width", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(int64_t width, IntArg("zfill", "width", bound[0]));
  const std::string& s = self.as_string();
  int64_t length = static_cast<int64_t>(CodePointCount(s));
  if (width <= length) return self;
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(static_cast<size_t>(width)));
  size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  std::string out =
      s.substr(0, sign) + std::string(static_cast<size_t>(width - length), '0') + s.substr(sign);
  return Value::String(std::move(out));
}

Expected<Value> StrPartition(Runtime&, const Value& self, const CallArgs& args, bool from_right) {
  std::string_view name = from_right ? "rpartition" : "partition";
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs(name, args, {{"sep", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(std::string sep, StringArg(name, "sep", bound[0]));
  if (sep.empty()) return InvalidArgument("empty separator");
  const std::string& s = self.as_string();
  size_t hit = from_right ? s.rfind(sep) : s.find(sep);
  if (hit == std::string::npos) {
    return StringList(from_right ? std::vector<std::string>{"", "", s} : std::vector<std::string>{s, "", ""},
                      SequenceKind::kTuple);
  }
  return StringList({s.substr(0, hit), sep, s.substr(hit + sep.size())}, SequenceKind::kTuple);
}

Expected<Value> StrAffixRemove(Runtime&, const Value& self, const CallArgs& args, bool prefix) {
  std::string_view name = prefix ? "removeprefix" : "removesuffix";
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs(name, args, {{"affix", std::nullopt}}));
  KILN_ASSIGN_OR_RETURN(std::string affix, StringArg(name, "affix", bound[0]));
  const std::string& s = self.as_string();
  if (affix.empty() || affix.size() > s.size()) return self;
  if (prefix && s.compare(0, affix.size(), affix) == 0) return Value::String(s.substr(affix.size()));
  if (!prefix && s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
    return Value::String(s.substr(0, s.size() - affix.size()));
  }
  return self;
}

// ---- dict and list methods ----

Expected<Value> DictGet(Runtime&, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound,
                        BindArgs("get", args, {{"key", std::nullopt}, {"default", Value::None()}}));
  if (!IsHashable(bound[0])) return InvalidArgument("unhashable type: '{}'", TypeName(bound[0]));
  if (const Value* v = self.as_dict().Find(bound[0])) return *v;
  return bound[1];
}

Expected<Value> DictView(Runtime& rt, const Value& self, const CallArgs& args, SequenceKind kind) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    return InvalidArgument("dict view methods take no arguments");
  }
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(self.as_dict().size())));
  std::vector<Value> items;
  items.reserve(self.as_dict().size());
  for (const auto& [key, value] : self.as_dict().entries()) {
    if (kind == SequenceKind::kDictKeys) {
      items.push_back(key);
    } else if (kind == SequenceKind::kDictValues) {
      items.push_back(value);
    } else {
      KILN_ASSIGN_OR_RETURN(Value pair, MakeSequence({key, value}, SequenceKind::kTuple));
      items.push_back(std::move(pair));
    }
  }
  return MakeSequence(std::move(items), kind);
}

Expected<Value> ListIndex(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("index", args, {{"value", std::nullopt}}));
  const auto& items = self.as_list().items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (Equals(rt, items[i], bound[0])) return Value::Int(static_cast<int64_t>(i));
  }
  KILN_RETURN_IF_ERROR(rt.status());
  return InvalidArgument("value is not in list");
}

Expected<Value> ListCount(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("count", args, {{"value", std::nullopt}}));
  int64_t n = 0;
  for (const Value& item : self.as_list().items) n += Equals(rt, item, bound[0]) ? 1 : 0;
  KILN_RETURN_IF_ERROR(rt.status());
  return Value::Int(n);
}

Status NoArgs(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    return InvalidArgument("{}() takes no arguments", name);
  }
  return Status::Ok();
}

template <std::string (*F)(std::string_view)>
Expected<Value> StrMap(Runtime& rt, const Value& self, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("str method", args));
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(self.as_string().size())));
  return Value::String(F(self.as_string()));
}

template <bool (*F)(std::string_view)>
Expected<Value> StrPredicate(Runtime&, const Value& self, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("str method", args));
  return Value::Bool(F(self.as_string()));
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::optional<Value> StringMethod(const Value& self, std::string_view name) {
  struct Entry {
    std::string_view name;
    Method method;
  };
  static const Entry kMethods[] = {
      {"strip", [](Runtime& rt, const Value& s,
                   const CallArgs& a) { return StrStrip(rt, s, a, "strip", true, true); }},
      {"lstrip", [](Runtime& rt, const Value& s,
                    const CallArgs& a) { return StrStrip(rt, s, a, "lstrip", true, false); }},
      {"rstrip", [](Runtime& rt, const Value& s,
                    const CallArgs& a) { return StrStrip(rt, s, a, "rstrip", false, true); }},
      {"split", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrSplit(rt, s, a, false); }},
      {"rsplit", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrSplit(rt, s, a, true); }},
      {"splitlines",
       [](Runtime& rt, const Value& s, const CallArgs& a) -> Expected<Value> {
         KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("splitlines", a, {{"keepends", Value::Bool(false)}}));
         const std::string& text = s.as_string();
         KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(text.size()) +
                                        kValueCost * static_cast<int64_t>(PySplitLinesCount(text))));
         return StringList(PySplitLines(text, Truthy(bound[0])));
       }},
      {"startswith", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrAffix(rt, s, a, true); }},
      {"endswith", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrAffix(rt, s, a, false); }},
      {"upper", StrMap<PyUpper>},
      {"lower", StrMap<PyLower>},
      {"casefold", StrMap<PyLower>},
      {"title", StrMap<PyTitle>},
      {"capitalize", StrMap<PyCapitalize>},
      {"swapcase", StrMap<PySwapCase>},
      {"replace", StrReplace},
      {"find", [](Runtime& rt, const Value& s,
                  const CallArgs& a) { return StrFind(rt, s, a, "find", false, false); }},
      {"rfind", [](Runtime& rt, const Value& s,
                   const CallArgs& a) { return StrFind(rt, s, a, "rfind", true, false); }},
      {"index", [](Runtime& rt, const Value& s,
                   const CallArgs& a) { return StrFind(rt, s, a, "index", false, true); }},
      {"rindex", [](Runtime& rt, const Value& s,
                    const CallArgs& a) { return StrFind(rt, s, a, "rindex", true, true); }},
      {"count", StrCount},
      {"join", StrJoin},
      {"format",
       [](Runtime& rt, const Value& s, const CallArgs& a) -> Expected<Value> {
         KILN_ASSIGN_OR_RETURN(std::string out, PyStrFormat(rt, s.as_string(), a));
         return Value::String(std::move(out));
       }},
      {"center",
       [](Runtime& rt, const Value& s, const CallArgs& a) { return StrJustify(rt, s, a, "center"); }},
      {"ljust", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrJustify(rt, s, a, "ljust"); }},
      {"rjust", [](Runtime& rt, const Value& s, const CallArgs& a) { return StrJustify(rt, s, a, "rjust"); }},
      {"zfill", StrZfill},
      {"partition",
       [](Runtime& rt, const Value& s, const CallArgs& a) { return StrPartition(rt, s, a, false); }},
      {"rpartition",
       [](Runtime& rt, const Value& s, const CallArgs& a) { return StrPartition(rt, s, a, true); }},
      {"removeprefix",
       [](Runtime& rt, const Value& s, const CallArgs& a) { return StrAffixRemove(rt, s, a, true); }},
      {"removesuffix",
       [](Runtime& rt, const Value& s, const CallArgs& a) { return StrAffixRemove(rt, s, a, false); }},
      {"isalpha", StrPredicate<PyIsAlpha>},
      {"isdigit", StrPredicate<PyIsDigit>},
      {"isdecimal", StrPredicate<PyIsDigit>},
      {"isnumeric", StrPredicate<PyIsDigit>},
      {"isalnum", StrPredicate<PyIsAlnum>},
      {"isspace", StrPredicate<PyIsSpaceString>},
      {"islower", StrPredicate<PyIsLower>},
      {"isupper", StrPredicate<PyIsUpper>},
      {"isascii", StrPredicate<IsAscii>},
  };
  for (const Entry& entry : kMethods) {
    if (entry.name == name) return Bind(self, "str." + std::string(name), entry.method);
  }
  // Methods Python has that chat templates do not need: present, but
  // calling them is an error rather than a silent difference.
  for (std::string_view other : {"encode", "expandtabs", "translate", "maketrans", "format_map", "istitle",
                                 "isidentifier", "isprintable"}) {
    if (other == name) {
      return Bind(self, "str." + std::string(name),
                  [](Runtime&, const Value&, const CallArgs&) -> Expected<Value> {
                    return Unsupported("this str method is not supported in chat templates");
                  });
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> FindMethod(const Value& receiver, std::string_view name) {
  if (receiver.is_string()) return StringMethod(receiver, name);
  if (receiver.is_dict()) {
    if (name == "get") return Bind(receiver, "dict.get", DictGet);
    if (name == "items") {
      return Bind(receiver, "dict.items", [](Runtime& rt, const Value& s, const CallArgs& a) {
        return DictView(rt, s, a, SequenceKind::kDictItems);
      });
    }
    if (name == "keys") {
      return Bind(receiver, "dict.keys", [](Runtime& rt, const Value& s, const CallArgs& a) {
        return DictView(rt, s, a, SequenceKind::kDictKeys);
      });
    }
    if (name == "values") {
      return Bind(receiver, "dict.values", [](Runtime& rt, const Value& s, const CallArgs& a) {
        return DictView(rt, s, a, SequenceKind::kDictValues);
      });
    }
    if (name == "copy") {
      return Bind(receiver, "dict.copy", [](Runtime&, const Value& s, const CallArgs& a) -> Expected<Value> {
        KILN_RETURN_IF_ERROR(NoArgs("copy", a));
        return s;
      });
    }
    for (std::string_view unsafe : {"pop", "popitem", "setdefault", "update", "clear"}) {
      if (name == unsafe) return Unsafe(receiver, name);
    }
    return std::nullopt;
  }
  if (receiver.is_list()) {
    SequenceKind kind = receiver.as_list().kind;
    bool sequence =
        kind == SequenceKind::kList || kind == SequenceKind::kTuple || kind == SequenceKind::kRange;
    if (sequence && name == "index") return Bind(receiver, "index", ListIndex);
    if (sequence && name == "count") return Bind(receiver, "count", ListCount);
    if (kind == SequenceKind::kList) {
      if (name == "copy") {
        return Bind(receiver, "list.copy",
                    [](Runtime&, const Value& s, const CallArgs& a) -> Expected<Value> {
                      KILN_RETURN_IF_ERROR(NoArgs("copy", a));
                      return s;
                    });
      }
      for (std::string_view unsafe :
           {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"}) {
        if (name == unsafe) return Unsafe(receiver, name);
      }
    }
  }
  return std::nullopt;
}

}  // namespace kiln::jinja
