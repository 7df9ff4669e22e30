// The values the template interpreter computes with: Python's object model as
// far as chat templates can observe it (None, bool, int, float, str, list,
// tuple, dict, namespace, loop, callables) plus jinja2's Undefined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace kiln::jinja {

class Runtime;
struct ListData;
class DictData;
struct Function;
class Namespace;
struct LoopState;

// Lists and dicts may nest this deep. Deeper values are refused when built,
// so that printing, comparing and freeing them never recurses without bound.
inline constexpr int kMaxValueDepth = 256;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kLoop,
    kFunction,
  };

  // An undefined value without a description.
  Value() = default;

  // An undefined value; `hint` says what was missing ("'x' is undefined"),
  // for the error raised if it is used where a value is required.
  static Value Undefined(std::string hint);
  static Value None() { return Value(Data(std::in_place_index<1>)); }
  static Value Bool(bool b) { return Value(Data(std::in_place_index<2>, b)); }
  static Value Int(int64_t i) { return Value(Data(std::in_place_index<3>, i)); }
  static Value Float(double f) { return Value(Data(std::in_place_index<4>, f)); }
  static Value String(std::string s);
  static Value FromList(std::shared_ptr<const ListData> list);
  static Value FromDict(std::shared_ptr<const DictData> dict);
  static Value FromNamespace(std::shared_ptr<Namespace> ns);
  static Value FromLoop(std::shared_ptr<LoopState> loop);
  static Value FromFunction(std::shared_ptr<const Function> fn);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_loop() const { return kind() == Kind::kLoop; }
  bool is_function() const { return kind() == Kind::kFunction; }
  // int or bool, which Python treats as an int.
  bool is_integral() const { return is_int() || is_bool(); }
  // int, bool or float.
  bool is_number() const { return is_integral() || is_float(); }

  // Accessors. REQUIRES: the matching kind.
  bool as_bool() const { return std::get<2>(data_); }
  int64_t as_int() const { return is_bool() ? std::get<2>(data_) : std::get<3>(data_); }
  double as_float() const { return is_float() ? std::get<4>(data_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *std::get<5>(data_); }
  const ListData& as_list() const { return *std::get<6>(data_); }
  const std::shared_ptr<const ListData>& list_ptr() const { return std::get<6>(data_); }
  const DictData& as_dict() const { return *std::get<7>(data_); }
  const std::shared_ptr<const DictData>& dict_ptr() const { return std::get<7>(data_); }
  const std::shared_ptr<Namespace>& as_namespace() const { return std::get<8>(data_); }
  const std::shared_ptr<LoopState>& as_loop() const { return std::get<9>(data_); }
  const Function& as_function() const { return *std::get<10>(data_); }
  const void* identity() const;  // the shared object, for `is sameas`

  // What was missing, for an undefined value ("" if unknown).
  const std::string& undefined_hint() const;

  // Containers nested in this value: 0 for scalars and opaque objects.
  int depth() const;

 private:
  struct UndefinedData {
    std::shared_ptr<const std::string> hint;
  };
  struct NoneData {};
  using Data =
      std::variant<UndefinedData, NoneData, bool, int64_t, double, std::shared_ptr<const std::string>,
                   std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                   std::shared_ptr<Namespace>, std::shared_ptr<LoopState>, std::shared_ptr<const Function>>;
  explicit Value(Data data) : data_(std::move(data)) {}

  Data data_;
};

// The kinds of Python sequence that print, measure or compare differently.
enum class SequenceKind : uint8_t {
  kList,
  kTuple,
  kRange,       // range(...): prints as range(start, stop[, step])
  kGenerator,   // what map/select/... return: always true, no len()
  kDictKeys,    // dict.keys()
  kDictValues,  // dict.values()
  kDictItems,   // dict.items()
};

// The items of a list-like value. Immutable once wrapped in a Value, like
// everything a sandboxed template can reach except namespaces.
struct ListData {
  std::vector<Value> items;
  SequenceKind kind = SequenceKind::kList;
  int depth = 1;                                            // containers nested in this one, itself included
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange only
};

// An insertion-ordered dict whose keys follow Python's equality (1, 1.0 and
// True are one key).
class DictData {
 public:
  // Inserts `key` or replaces its value, keeping its first position.
  // Fails for unhashable keys (lists, dicts, ...).
  Status Set(Value key, Value value);

  // The value stored under `key`, or nullptr.
  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;

  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  // Containers nested in this one, itself included.
  int depth() const { return depth_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_keys_;
  int depth_ = 1;
};

// Arguments of a call, as Python receives them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Something a template can call: a global, a bound method, a macro.
struct Function {
  std::string name;
  std::function<Expected<Value>(Runtime&, const CallArgs&)> call;
};

// A mutable bag of attributes made by namespace(): the one thing templates
// may change after creating it (`{% set ns.x = ... %}`).
class Namespace {
 public:
  // The attribute `name`, or nullptr.
  const Value* Find(std::string_view name) const;
  // Sets or adds the attribute, keeping first-insertion order.
  void Set(std::string_view name, Value value);
  const std::vector<std::pair<std::string, Value>>& attributes() const { return attributes_; }
  // Drops every attribute (used to break reference cycles after a render).
  void Clear() { attributes_.clear(); }

 private:
  std::vector<std::pair<std::string, Value>> attributes_;
};

// The state behind a for loop's `loop` variable.
struct LoopState {
  std::shared_ptr<const ListData> items;
  size_t index0 = 0;
  int depth0 = 0;
  Value recurse;  // loop(...) of a recursive loop; undefined otherwise
  std::optional<std::vector<Value>> changed_last;
};

// Builds a sequence; fails when it would nest deeper than kMaxValueDepth.
Expected<Value> MakeSequence(std::vector<Value> items, SequenceKind kind = SequenceKind::kList);
// Wraps a finished dict; fails when it would nest deeper than kMaxValueDepth.
Expected<Value> MakeDict(DictData dict);

// Python's truth value (undefined is false; generators are always true).
bool Truthy(const Value& v);

// Python's type name of `v`, for error messages ("int", "str", "dict", ...).
std::string_view TypeName(const Value& v);

// Whether `v` can be a dict key (Python hashability).
bool IsHashable(const Value& v);

// Python's == for hashable keys (numbers across int/float/bool, strings,
// None, tuples of those).
bool KeysEqual(const Value& a, const Value& b);

}  // namespace kiln::jinja
