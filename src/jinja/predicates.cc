// jinja2's built-in tests (see predicates.h).
#include "jinja/predicates.h"

#include <cmath>

#include "jinja/call_args.h"
#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/py_string.h"
#include "jinja/value_text.h"

namespace kiln::jinja {
namespace {

// The single `other` argument of a comparison test.
Expected<Value> OtherArg(std::string_view name, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs(name, args, {{"other", std::nullopt}}));
  return bound[0];
}

Status NoArgs(std::string_view name, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    return InvalidArgument("test '{}' takes no arguments", name);
  }
  return Status::Ok();
}

template <CompareOp kOp>
Expected<bool> CompareTest(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Value other, OtherArg("comparison", args));
  return Compare(rt, kOp, v, other);
}

// jinja2 tests `value % divisor == expected`, literally.
Expected<bool> RemainderIs(Runtime& rt, const Value& v, const Value& divisor, int64_t expected) {
  KILN_ASSIGN_OR_RETURN(Value r, ApplyBinary(rt, BinaryOp::kMod, v, divisor));
  bool equal = Equals(rt, r, Value::Int(expected));
  KILN_RETURN_IF_ERROR(rt.status());
  return equal;
}

Expected<bool> Odd(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("odd", args));
  return RemainderIs(rt, v, Value::Int(2), 1);
}

Expected<bool> Even(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("even", args));
  return RemainderIs(rt, v, Value::Int(2), 0);
}

Expected<bool> DivisibleBy(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("divisibleby", args, {{"num", std::nullopt}}));
  return RemainderIs(rt, v, bound[0], 0);
}

Expected<bool> Sameas(Runtime&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Value other, OtherArg("sameas", args));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kUndefined: return false;  // distinct Undefined objects
    case Value::Kind::kNone: return true;
    case Value::Kind::kBool: return v.as_bool() == other.as_bool();
    // CPython shares the small integers; other numbers are separate objects.
    case Value::Kind::kInt: return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::kFloat: return false;
    default: return v.identity() == other.identity();
  }
}

Expected<bool> In(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(auto bound, BindArgs("in", args, {{"seq", std::nullopt}}));
  return Contains(rt, bound[0], v);
}

bool IsIterable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kString:
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kLoop: return true;
    default: return false;
  }
}

bool IsSequence(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kString:
    case Value::Kind::kDict: return true;
    case Value::Kind::kList: {
      SequenceKind kind = v.as_list().kind;
      return kind == SequenceKind::kList || kind == SequenceKind::kTuple || kind == SequenceKind::kRange;
    }
    default: return false;
  }
}

// A test on the value alone; `F` decides.
template <bool (*F)(const Value&)>
Expected<bool> Simple(Runtime&, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("test", args));
  return F(v);
}

bool Defined(const Value& v) {
  return !v.is_undefined();
}
bool Undefined(const Value& v) {
  return v.is_undefined();
}
bool None(const Value& v) {
  return v.is_none();
}
bool Boolean(const Value& v) {
  return v.is_bool();
}
bool False(const Value& v) {
  return v.is_bool() && !v.as_bool();
}
bool True(const Value& v) {
  return v.is_bool() && v.as_bool();
}
bool Integer(const Value& v) {
  return v.is_int();
}
bool Float(const Value& v) {
  return v.is_float();
}
bool Number(const Value& v) {
  return v.is_number();
}
bool String(const Value& v) {
  return v.is_string();
}
bool Mapping(const Value& v) {
  return v.is_dict();
}
bool Callable(const Value& v) {
  return v.is_function() || v.is_loop();
}
bool Escaped(const Value&) {
  return false;
}

Expected<bool> Lower(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("lower", args));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, v));
  return PyIsLower(s);
}

Expected<bool> Upper(Runtime& rt, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("upper", args));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(rt, v));
  return PyIsUpper(s);
}

Expected<bool> IsFilter(Runtime&, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("filter", args));
  return v.is_string() && FindFilter(v.as_string()) != nullptr;
}

Expected<bool> IsTest(Runtime&, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(NoArgs("test", args));
  return v.is_string() && FindTest(v.as_string()) != nullptr;
}

struct Entry {
  std::string_view name;
  TestFn fn;
};

const Entry kTests[] = {
    {"defined", Simple<Defined>},
    {"undefined", Simple<Undefined>},
    {"none", Simple<None>},
    {"boolean", Simple<Boolean>},
    {"false", Simple<False>},
    {"true", Simple<True>},
    {"integer", Simple<Integer>},
    {"float", Simple<Float>},
    {"number", Simple<Number>},
    {"string", Simple<String>},
    {"mapping", Simple<Mapping>},
    {"iterable", Simple<IsIterable>},
    {"sequence", Simple<IsSequence>},
    {"callable", Simple<Callable>},
    {"escaped", Simple<Escaped>},
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"sameas", Sameas},
    {"in", In},
    {"lower", Lower},
    {"upper", Upper},
    {"filter", IsFilter},
    {"test", IsTest},
    {"==", CompareTest<CompareOp::kEq>},
    {"eq", CompareTest<CompareOp::kEq>},
    {"equalto", CompareTest<CompareOp::kEq>},
    {"!=", CompareTest<CompareOp::kNe>},
    {"ne", CompareTest<CompareOp::kNe>},
    {">", CompareTest<CompareOp::kGt>},
    {"gt", CompareTest<CompareOp::kGt>},
    {"greaterthan", CompareTest<CompareOp::kGt>},
    {">=", CompareTest<CompareOp::kGe>},
    {"ge", CompareTest<CompareOp::kGe>},
    {"<", CompareTest<CompareOp::kLt>},
    {"lt", CompareTest<CompareOp::kLt>},
    {"lessthan", CompareTest<CompareOp::kLt>},
    {"<=", CompareTest<CompareOp::kLe>},
    {"le", CompareTest<CompareOp::kLe>},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const Entry& entry : kTests) {
    if (entry.name == name) return entry.fn;
  }
  return nullptr;
}

}  // namespace kiln::jinja
