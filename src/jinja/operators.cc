// Python operator semantics for template values (see operators.h).
#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/printf_format.h"
#include "jinja/py_string.h"

namespace kiln::jinja {
namespace {

const char* OpSymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "** or pow()";
  }
  return "?";
}

Status Unsupported(BinaryOp op, const Value& a, const Value& b) {
  return InvalidArgument("unsupported operand type(s) for {}: '{}' and '{}'", OpSymbol(op), TypeName(a),
                         TypeName(b));
}

Status IntegerOverflow() {
  return OutOfRange("integer result does not fit in 64 bits");
}

bool IsPlainSequence(const Value& v, SequenceKind kind) {
  return v.is_list() && v.as_list().kind == kind;
}

// Python's int == float, exactly (not through a rounding conversion).
bool IntEqualsFloat(int64_t i, double f) {
  if (std::isnan(f) || std::isinf(f)) return false;
  if (f != std::floor(f)) return false;
  if (f < -9.3e18 || f > 9.3e18) return false;
  if (f >= 9.2233720368547758e18) return false;
  return static_cast<int64_t>(f) == i;
}

int CompareNumbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  double x = a.as_float(), y = b.as_float();
  return x < y ? -1 : x > y ? 1 : 0;
}

Expected<Value> RepeatString(Runtime& rt, const std::string& s, int64_t times) {
  if (times <= 0 || s.empty()) return Value::String("");
  if (static_cast<uint64_t>(times) > rt.limits().max_output_bytes / s.size() + 1) {
    return rt.CheckStringSize(rt.limits().max_output_bytes + 1);
  }
  size_t total = s.size() * static_cast<size_t>(times);
  KILN_RETURN_IF_ERROR(rt.CheckStringSize(total));
  KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(total)));
  std::string out;
  out.reserve(total);
  for (int64_t i = 0; i < times; ++i) out += s;
  return Value::String(std::move(out));
}

Expected<Value> RepeatList(Runtime& rt, const ListData& list, int64_t times) {
  std::vector<Value> items;
  if (times > 0 && !list.items.empty()) {
    if (static_cast<uint64_t>(times) >
        static_cast<uint64_t>(rt.limits().max_loop_iterations) / list.items.size()) {
      return ResourceExhausted("list of more than {} items", rt.limits().max_loop_iterations);
    }
    size_t total = list.items.size() * static_cast<size_t>(times);
    KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(total)));
    items.reserve(total);
    for (int64_t i = 0; i < times; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
  }
  return MakeSequence(std::move(items), list.kind);
}

// Python's float floor division and modulo (floatobject.c's divmod).
void FloatDivMod(double x, double y, double* floordiv, double* mod) {
  double m = std::fmod(x, y);
  double div = (x - m) / y;
  if (m != 0) {
    if ((y < 0) != (m < 0)) {
      m += y;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, y);
  }
  double fd;
  if (div != 0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, x / y);
  }
  *floordiv = fd;
  *mod = m;
}

Expected<Value> Arithmetic(Runtime& rt, BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return Unsupported(op, a, b);
  if (a.is_integral() && b.is_integral() && op != BinaryOp::kDiv) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return IntegerOverflow();
        return Value::Int(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return IntegerOverflow();
        return Value::Int(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return IntegerOverflow();
        return Value::Int(r);
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) return InvalidArgument("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinaryOp::kMod) return Value::Int(0);
          return IntegerOverflow();
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::Int(op == BinaryOp::kFloorDiv ? q : m);
      }
      case BinaryOp::kPow: {
        if (y < 0) {
          if (x == 0) return InvalidArgument("0.0 cannot be raised to a negative power");
          return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
        int64_t result = 1, base = x;
        while (y > 0) {
          if (y & 1) {
            if (__builtin_mul_overflow(result, base, &result)) return IntegerOverflow();
          }
          y >>= 1;
          if (y > 0 && __builtin_mul_overflow(base, base, &base)) return IntegerOverflow();
        }
        return Value::Int(result);
      }
      default: break;
    }
  }
  double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinaryOp::kAdd: return Value::Float(x + y);
    case BinaryOp::kSub: return Value::Float(x - y);
    case BinaryOp::kMul: return Value::Float(x * y);
    case BinaryOp::kDiv:
      if (y == 0) return InvalidArgument("division by zero");
      return Value::Float(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) {
        return InvalidArgument("float {} by zero", op == BinaryOp::kMod ? "modulo" : "floor division");
      }
      double fd, m;
      FloatDivMod(x, y, &fd, &m);
      return Value::Float(op == BinaryOp::kFloorDiv ? fd : m);
    }
    case BinaryOp::kPow: {
      if (x == 0 && y < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) return Unsupported(op, a, b).WithContext("complex result");
      double r = std::pow(x, y);
      if (std::isinf(r) && !std::isinf(x) && !std::isinf(y)) {
        return OutOfRange("numerical result out of range");
      }
      return Value::Float(r);
    }
  }
  return Unsupported(op, a, b);
}

}  // namespace

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return InvalidArgument("{}", hint.empty() ? std::string("value is undefined") : hint);
}

Expected<std::vector<Value>> IterItems(Runtime& rt, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>();
    case Value::Kind::kString: {
      const std::string& s = v.as_string();
      KILN_RETURN_IF_ERROR(rt.Charge(kValueCost * static_cast<int64_t>(CodePointCount(s))));
      std::vector<Value> items;
      for (size_t pos = 0; pos < s.size();) {
        size_t size = DecodeCodePoint(s, pos).size;
        items.push_back(Value::String(s.substr(pos, size)));
        pos += size;
      }
      return items;
    }
    case Value::Kind::kList:
      KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(v.as_list().items.size())));
      return v.as_list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& entry : v.as_dict().entries()) keys.push_back(entry.first);
      KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(keys.size())));
      return keys;
    }
    case Value::Kind::kLoop: return v.as_loop()->items->items;
    default: return InvalidArgument("'{}' object is not iterable", TypeName(v));
  }
}

Expected<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(CodePointCount(v.as_string()));
    case Value::Kind::kList:
      if (v.as_list().kind == SequenceKind::kGenerator) break;
      return static_cast<int64_t>(v.as_list().items.size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    case Value::Kind::kLoop: return static_cast<int64_t>(v.as_loop()->items->items.size());
    default: break;
  }
  return InvalidArgument("object of type '{}' has no len()", TypeName(v));
}

Expected<Value> ApplyBinary(Runtime& rt, BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string() || b.is_string()) {
        if (!a.is_string() || !b.is_string()) {
          if (a.is_string()) {
            return InvalidArgument("can only concatenate str (not \"{}\") to str", TypeName(b));
          }
          return Unsupported(op, a, b);
        }
        size_t total = a.as_string().size() + b.as_string().size();
        KILN_RETURN_IF_ERROR(rt.CheckStringSize(total));
        KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(total)));
        return Value::String(a.as_string() + b.as_string());
      }
      if (a.is_list() || b.is_list()) {
        for (SequenceKind kind : {SequenceKind::kList, SequenceKind::kTuple}) {
          if (IsPlainSequence(a, kind) && IsPlainSequence(b, kind)) {
            const auto& x = a.as_list().items;
            const auto& y = b.as_list().items;
            if (x.size() + y.size() > static_cast<size_t>(rt.limits().max_loop_iterations)) {
              return ResourceExhausted("list of more than {} items", rt.limits().max_loop_iterations);
            }
            KILN_RETURN_IF_ERROR(rt.Charge(static_cast<int64_t>(x.size() + y.size())));
            std::vector<Value> items;
            items.reserve(x.size() + y.size());
            items.insert(items.end(), x.begin(), x.end());
            items.insert(items.end(), y.begin(), y.end());
            return MakeSequence(std::move(items), kind);
          }
        }
        if (IsPlainSequence(a, SequenceKind::kList)) {
          return InvalidArgument("can only concatenate list (not \"{}\") to list", TypeName(b));
        }
        return Unsupported(op, a, b);
      }
      return Arithmetic(rt, op, a, b);
    case BinaryOp::kMul:
      if (a.is_string() && b.is_integral()) return RepeatString(rt, a.as_string(), b.as_int());
      if (b.is_string() && a.is_integral()) return RepeatString(rt, b.as_string(), a.as_int());
      for (SequenceKind kind : {SequenceKind::kList, SequenceKind::kTuple}) {
        if (IsPlainSequence(a, kind) && b.is_integral()) return RepeatList(rt, a.as_list(), b.as_int());
        if (IsPlainSequence(b, kind) && a.is_integral()) return RepeatList(rt, b.as_list(), a.as_int());
      }
      return Arithmetic(rt, op, a, b);
    case BinaryOp::kMod:
      if (a.is_string()) {
        KILN_ASSIGN_OR_RETURN(std::string s, PercentFormat(rt, a.as_string(), b));
        return Value::String(std::move(s));
      }
      return Arithmetic(rt, op, a, b);
    default: return Arithmetic(rt, op, a, b);
  }
}

Expected<Value> Negate(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return IntegerOverflow();
    return Value::Int(-v.as_int());
  }
  if (v.is_float()) return Value::Float(-v.as_float());
  return InvalidArgument("bad operand type for unary -: '{}'", TypeName(v));
}

Expected<Value> UnaryPlus(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.as_int());
  if (v.is_float()) return v;
  return InvalidArgument("bad operand type for unary +: '{}'", TypeName(v));
}

bool Equals(Runtime& rt, const Value& a, const Value& b) {
  if (!rt.Charge().ok()) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    if (a.is_float() && b.is_float()) return a.as_float() == b.as_float();
    return a.is_float() ? IntEqualsFloat(b.as_int(), a.as_float()) : IntEqualsFloat(a.as_int(), b.as_float());
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      if (&x == &y) return true;
      if (x.kind != y.kind) return false;
      if (x.kind == SequenceKind::kGenerator || x.kind == SequenceKind::kDictValues) return false;
      if (x.items.size() != y.items.size()) return false;
      if (x.kind == SequenceKind::kDictKeys || x.kind == SequenceKind::kDictItems) {
        // Set semantics: every item of one is in the other.
        for (const Value& item : x.items) {
          bool found = false;
          for (const Value& other : y.items) {
            if (Equals(rt, item, other)) {
              found = true;
              break;
            }
          }
          if (!found) return false;
        }
        return true;
      }
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(rt, x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.Find(key);
        if (!other || !Equals(rt, value, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

Expected<int> Order(Runtime& rt, const Value& a, const Value& b) {
  KILN_RETURN_IF_ERROR(rt.Charge());
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b);
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
      (a.as_list().kind == SequenceKind::kList || a.as_list().kind == SequenceKind::kTuple)) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(rt, x[i], y[i])) continue;
      return Order(rt, x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  return InvalidArgument("'<' not supported between instances of '{}' and '{}'", TypeName(a), TypeName(b));
}

Expected<bool> Contains(Runtime& rt, const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) return UndefinedError(item);
        return InvalidArgument("'in <string>' requires string as left operand, not {}", TypeName(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      if (container.as_list().kind == SequenceKind::kDictKeys && !IsHashable(item)) {
        return InvalidArgument("unhashable type: '{}'", TypeName(item));
      }
      for (const Value& x : container.as_list().items) {
        if (Equals(rt, x, item)) return true;
      }
      KILN_RETURN_IF_ERROR(rt.status());
      return false;
    case Value::Kind::kDict:
      if (!IsHashable(item)) return InvalidArgument("unhashable type: '{}'", TypeName(item));
      return container.as_dict().Find(item) != nullptr;
    default: return InvalidArgument("argument of type '{}' is not iterable", TypeName(container));
  }
}

Expected<bool> Compare(Runtime& rt, CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq: {
      bool eq = Equals(rt, a, b);
      KILN_RETURN_IF_ERROR(rt.status());
      return eq;
    }
    case CompareOp::kNe: {
      bool eq = Equals(rt, a, b);
      KILN_RETURN_IF_ERROR(rt.status());
      return !eq;
    }
    case CompareOp::kIn: return Contains(rt, b, a);
    case CompareOp::kNotIn: {
      KILN_ASSIGN_OR_RETURN(bool in, Contains(rt, b, a));
      return !in;
    }
    default: break;
  }
  // NaN compares false every way, which Order cannot express.
  if ((a.is_float() && std::isnan(a.as_float())) || (b.is_float() && std::isnan(b.as_float()))) {
    if (b.is_number() && a.is_number()) return false;
  }
  auto order = Order(rt, a, b);
  if (!order.ok()) {
    const char* symbol = op == CompareOp::kLt   ? "<"
                         : op == CompareOp::kLe ? "<="
                         : op == CompareOp::kGt ? ">"
                                                : ">=";
    if (order.status().message().rfind("'<' not supported", 0) == 0) {
      return InvalidArgument("'{}' not supported between instances of '{}' and '{}'", symbol, TypeName(a),
                             TypeName(b));
    }
    return order.status();
  }
  switch (op) {
    case CompareOp::kLt: return *order < 0;
    case CompareOp::kLe: return *order <= 0;
    case CompareOp::kGt: return *order > 0;
    case CompareOp::kGe: return *order >= 0;
    default: return false;
  }
}

}  // namespace kiln::jinja
