// Python's operators on template values: arithmetic, comparison, equality,
// membership, iteration and len(), with Python's results and Python's
// errors ("unsupported operand type(s) for +: 'int' and 'str'").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

namespace kiln::jinja {

// a <op> b for + - * / // % **.
Expected<Value> ApplyBinary(Runtime& rt, BinaryOp op, const Value& a, const Value& b);
// -v and +v.
Expected<Value> Negate(const Value& v);
Expected<Value> UnaryPlus(const Value& v);

// Python's a == b. Deep for lists and dicts; identity for namespaces and
// callables. Charges the runtime for the elements it visits.
bool Equals(Runtime& rt, const Value& a, const Value& b);

// a <op> b for the comparison operators, `in` and `not in`.
Expected<bool> Compare(Runtime& rt, CompareOp op, const Value& a, const Value& b);

// Python's `item in container`.
Expected<bool> Contains(Runtime& rt, const Value& container, const Value& item);

// Python's ordering for sorting: negative, zero or positive; fails for
// values Python cannot order ('<' not supported between 'str' and 'int').
Expected<int> Order(Runtime& rt, const Value& a, const Value& b);

// Python's iter(v): the items a for loop visits (a string's characters, a
// dict's keys; nothing for undefined). Fails for values that are not
// iterable.
Expected<std::vector<Value>> IterItems(Runtime& rt, const Value& v);

// Python's len(v). Fails for values without a length (numbers, generators).
Expected<int64_t> Length(const Value& v);

// The error jinja2 raises when an undefined value is used as a value.
Status UndefinedError(const Value& undefined);

}  // namespace kiln::jinja
