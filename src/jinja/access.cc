// Sandboxed attribute, item and slice access (see access.h).
#include "jinja/access.h"

#include <fmt/format.h>

#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/py_string.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

// jinja2's object_type_repr: how an undefined value names its owner.
std::string ObjectTypeRepr(const Value& obj) {
  if (obj.is_none()) return "None";
  return fmt::format("{} object", TypeName(obj));
}

Value MissingAttribute(const Value& obj, std::string_view name) {
  return Value::Undefined(fmt::format("'{}' has no attribute '{}'", ObjectTypeRepr(obj), name));
}

Value MissingElement(Runtime& rt, const Value& obj, const Value& key) {
  if (key.is_string()) return MissingAttribute(obj, key.as_string());
  std::string repr;
  if (!AppendRepr(rt, key, &repr).ok()) repr = "?";
  return Value::Undefined(fmt::format("{} has no element {}", ObjectTypeRepr(obj), repr));
}

Expected<Value> LoopCycle(std::shared_ptr<LoopState> loop, const CallArgs& args) {
  if (!args.keyword.empty()) return InvalidArgument("cycle() takes no keyword arguments");
  if (args.positional.empty()) return InvalidArgument("no items for cycling given");
  return args.positional[loop->index0 % args.positional.size()];
}

std::optional<Value> LoopAttribute(const std::shared_ptr<LoopState>& loop, std::string_view name) {
  const auto& items = loop->items->items;
  int64_t length = static_cast<int64_t>(items.size());
  int64_t index0 = static_cast<int64_t>(loop->index0);
  if (name == "index") return Value::Int(index0 + 1);
  if (name == "index0") return Value::Int(index0);
  if (name == "revindex") return Value::Int(length - index0);
  if (name == "revindex0") return Value::Int(length - index0 - 1);
  if (name == "first") return Value::Bool(index0 == 0);
  if (name == "last") return Value::Bool(index0 + 1 == length);
  if (name == "length") return Value::Int(length);
  if (name == "depth") return Value::Int(loop->depth0 + 1);
  if (name == "depth0") return Value::Int(loop->depth0);
  if (name == "previtem") {
    if (index0 == 0) return Value::Undefined("there is no previous item");
    return items[loop->index0 - 1];
  }
  if (name == "nextitem") {
    if (index0 + 1 >= length) return Value::Undefined("there is no next item");
    return items[loop->index0 + 1];
  }
  if (name == "cycle") {
    auto fn = std::make_shared<Function>();
    fn->name = "LoopContext.cycle";
    fn->call = [loop](Runtime&, const CallArgs& args) { return LoopCycle(loop, args); };
    return Value::FromFunction(std::move(fn));
  }
  if (name == "changed") {
    auto fn = std::make_shared<Function>();
    fn->name = "LoopContext.changed";
    fn->call = [loop](Runtime& rt, const CallArgs& args) -> Expected<Value> {
      if (!args.keyword.empty()) return InvalidArgument("changed() takes no keyword arguments");
      bool same = loop->changed_last && loop->changed_last->size() == args.positional.size();
      for (size_t i = 0; same && i < args.positional.size(); ++i) {
        same = Equals(rt, (*loop->changed_last)[i], args.positional[i]);
      }
      KILN_RETURN_IF_ERROR(rt.status());
      if (same) return Value::Bool(false);
      loop->changed_last = args.positional;
      return Value::Bool(true);
    };
    return Value::FromFunction(std::move(fn));
  }
  return std::nullopt;
}

bool IsSubscriptable(const ListData& list) {
  return list.kind == SequenceKind::kList || list.kind == SequenceKind::kTuple ||
         list.kind == SequenceKind::kRange;
}

std::optional<int64_t> SliceBound(const Value& v, bool* valid) {
  if (v.is_none()) return std::nullopt;
  if (v.is_integral()) return v.as_int();
  *valid = false;
  return std::nullopt;
}

}  // namespace

Expected<Value> GetAttr(Runtime& rt, const Value& obj, std::string_view name) {
  KILN_RETURN_IF_ERROR(rt.Charge());
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return UndefinedError(obj);
    case Value::Kind::kDict: {
      if (auto method = FindMethod(obj, name)) return *method;
      if (const Value* v = obj.as_dict().FindString(name)) return *v;
      return MissingAttribute(obj, name);
    }
    case Value::Kind::kString:
    case Value::Kind::kList:
      if (auto method = FindMethod(obj, name)) return *method;
      return MissingAttribute(obj, name);
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_namespace()->Find(name)) return *v;
      return MissingAttribute(obj, name);
    case Value::Kind::kLoop:
      if (auto v = LoopAttribute(obj.as_loop(), name)) return *v;
      return MissingAttribute(obj, name);
    default: return MissingAttribute(obj, name);
  }
}

Expected<Value> GetItem(Runtime& rt, const Value& obj, const Value& key) {
  KILN_RETURN_IF_ERROR(rt.Charge());
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return UndefinedError(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.as_dict().Find(key)) return *v;
      break;
    case Value::Kind::kList: {
      const ListData& list = obj.as_list();
      if (key.is_integral() && IsSubscriptable(list)) {
        int64_t n = static_cast<int64_t>(list.items.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return list.items[static_cast<size_t>(i)];
        return MissingElement(rt, obj, key);
      }
      break;
    }
    case Value::Kind::kString:
      if (key.is_integral()) {
        std::vector<size_t> offsets = CodePointOffsets(obj.as_string());
        int64_t n = static_cast<int64_t>(offsets.size()) - 1;
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
          return Value::String(obj.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
        }
        return MissingElement(rt, obj, key);
      }
      break;
    default: break;
  }
  // jinja2 falls back to the attribute for string keys.
  if (key.is_string()) return GetAttr(rt, obj, key.as_string());
  return MissingElement(rt, obj, key);
}

Expected<Value> GetSlice(Runtime& rt, const Value& obj, const Value& start, const Value& stop,
                         const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  bool valid = true;
  std::optional<int64_t> lo = SliceBound(start, &valid);
  std::optional<int64_t> hi = SliceBound(stop, &valid);
  std::optional<int64_t> by = SliceBound(step, &valid);
  if (!valid) return Value::Undefined("slice indices must be integers or None");
  if (by && *by == 0) return InvalidArgument("slice step cannot be zero");
  if (by && *by == INT64_MIN) return OutOfRange("slice step out of range");
  int64_t stride = by.value_or(1);
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::vector<size_t> offsets = CodePointOffsets(s);
    std::vector<int64_t> picks = PySliceIndices(static_cast<int64_t>(offsets.size()) - 1, lo, hi, stride);
    std::string out;
    if (stride == 1 && !picks.empty()) {
      out = s.substr(offsets[picks.front()], offsets[picks.back() + 1] - offsets[picks.front()]);
    } else {
      for (int64_t i : picks) out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
    }
    KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(out.size())));
    return Value::String(std::move(out));
  }
  if (obj.is_list() && IsSubscriptable(obj.as_list())) {
    const ListData& list = obj.as_list();
    std::vector<int64_t> picks = PySliceIndices(static_cast<int64_t>(list.items.size()), lo, hi, stride);
    KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(picks.size())));
    std::vector<Value> items;
    items.reserve(picks.size());
    for (int64_t i : picks) items.push_back(list.items[static_cast<size_t>(i)]);
    KILN_ASSIGN_OR_RETURN(Value out, MakeSequence(std::move(items), list.kind));
    if (list.kind == SequenceKind::kRange) {
      // Python slices a range into another range; keep its printed bounds,
      // clamped the way slice.indices() clamps them.
      int64_t n = static_cast<int64_t>(list.items.size());
      auto clamp = [&](std::optional<int64_t> x, int64_t fallback) {
        if (!x) return fallback;
        int64_t v = *x;
        if (v < 0) {
          v += n;
          if (v < 0) v = stride < 0 ? -1 : 0;
        } else if (v >= n) {
          v = stride < 0 ? n - 1 : n;
        }
        return v;
      };
      auto data = std::make_shared<ListData>(out.as_list());
      data->range_start = list.range_start + clamp(lo, stride < 0 ? n - 1 : 0) * list.range_step;
      data->range_stop = list.range_start + clamp(hi, stride < 0 ? -1 : n) * list.range_step;
      data->range_step = list.range_step * stride;
      return Value::FromList(std::move(data));
    }
    return out;
  }
  return Value::Undefined(fmt::format("'{}' object is not subscriptable", TypeName(obj)));
}

Expected<Value> GetAttributePath(Runtime& rt, const Value& obj, std::string_view path) {
  Value current = obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos;
    Value key = Value::String(std::string(part));
    if (digits && part.size() < 18) key = Value::Int(std::stoll(std::string(part)));
    KILN_ASSIGN_OR_RETURN(current, GetItem(rt, current, key));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return current;
}

}  // namespace kiln::jinja
