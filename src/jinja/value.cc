// Template values: construction, truth, type names and dict keys.
#include "jinja/value.h"

#include <algorithm>
#include <cmath>

namespace kiln::jinja {

Value Value::Undefined(std::string hint) {
  return Value(
      Data(std::in_place_index<0>, UndefinedData{std::make_shared<const std::string>(std::move(hint))}));
}

Value Value::String(std::string s) {
  return Value(Data(std::in_place_index<5>, std::make_shared<const std::string>(std::move(s))));
}

Value Value::FromList(std::shared_ptr<const ListData> list) {
  return Value(Data(std::in_place_index<6>, std::move(list)));
}

Value Value::FromDict(std::shared_ptr<const DictData> dict) {
  return Value(Data(std::in_place_index<7>, std::move(dict)));
}

Value Value::FromNamespace(std::shared_ptr<Namespace> ns) {
  return Value(Data(std::in_place_index<8>, std::move(ns)));
}

Value Value::FromLoop(std::shared_ptr<LoopState> loop) {
  return Value(Data(std::in_place_index<9>, std::move(loop)));
}

Value Value::FromFunction(std::shared_ptr<const Function> fn) {
  return Value(Data(std::in_place_index<10>, std::move(fn)));
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  if (!is_undefined()) return kEmpty;
  const auto& hint = std::get<0>(data_).hint;
  return hint ? *hint : kEmpty;
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::kString: return std::get<5>(data_).get();
    case Kind::kList: return std::get<6>(data_).get();
    case Kind::kDict: return std::get<7>(data_).get();
    case Kind::kNamespace: return std::get<8>(data_).get();
    case Kind::kLoop: return std::get<9>(data_).get();
    case Kind::kFunction: return std::get<10>(data_).get();
    default: return nullptr;
  }
}

int Value::depth() const {
  if (is_list()) return as_list().depth;
  if (is_dict()) return as_dict().depth();
  return 0;
}

const Value* Namespace::Find(std::string_view name) const {
  for (const auto& [key, value] : attributes_) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Namespace::Set(std::string_view name, Value value) {
  for (auto& [key, old] : attributes_) {
    if (key == name) {
      old = std::move(value);
      return;
    }
  }
  attributes_.emplace_back(std::string(name), std::move(value));
}

bool IsHashable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
    case Value::Kind::kFunction: return true;
    case Value::Kind::kList: {
      const ListData& list = v.as_list();
      if (list.kind == SequenceKind::kRange || list.kind == SequenceKind::kGenerator) return true;
      if (list.kind != SequenceKind::kTuple) return false;
      return std::all_of(list.items.begin(), list.items.end(), IsHashable);
    }
    default: return false;
  }
}

bool KeysEqual(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      if (x.kind != SequenceKind::kTuple || y.kind != SequenceKind::kTuple) {
        return a.identity() == b.identity();
      }
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!KeysEqual(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

Status DictData::Set(Value key, Value value) {
  if (!IsHashable(key)) return InvalidArgument("unhashable type: '{}'", TypeName(key));
  depth_ = std::max(depth_, 1 + std::max(key.depth(), value.depth()));
  if (key.is_string()) {
    auto [it, inserted] = string_keys_.try_emplace(key.as_string(), entries_.size());
    if (!inserted) {
      entries_[it->second].second = std::move(value);
      return Status::Ok();
    }
    entries_.emplace_back(std::move(key), std::move(value));
    return Status::Ok();
  }
  for (auto& [k, v] : entries_) {
    if (!k.is_string() && KeysEqual(k, key)) {
      v = std::move(value);
      return Status::Ok();
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
  return Status::Ok();
}

const Value* DictData::FindString(std::string_view key) const {
  auto it = string_keys_.find(std::string(key));
  return it == string_keys_.end() ? nullptr : &entries_[it->second].second;
}

const Value* DictData::Find(const Value& key) const {
  if (key.is_string()) return FindString(key.as_string());
  if (!IsHashable(key)) return nullptr;
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && KeysEqual(k, key)) return &v;
  }
  return nullptr;
}

Expected<Value> MakeSequence(std::vector<Value> items, SequenceKind kind) {
  auto list = std::make_shared<ListData>();
  int depth = 1;
  for (const Value& item : items) depth = std::max(depth, 1 + item.depth());
  if (depth > kMaxValueDepth) {
    return OutOfRange("value nested more than {} levels deep", kMaxValueDepth);
  }
  list->items = std::move(items);
  list->kind = kind;
  list->depth = depth;
  return Value::FromList(std::move(list));
}

Expected<Value> MakeDict(DictData dict) {
  if (dict.depth() > kMaxValueDepth) {
    return OutOfRange("value nested more than {} levels deep", kMaxValueDepth);
  }
  return Value::FromDict(std::make_shared<const DictData>(std::move(dict)));
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0.0;
    case Value::Kind::kString: return !v.as_string().empty();
    case Value::Kind::kList:
      return v.as_list().kind == SequenceKind::kGenerator || !v.as_list().items.empty();
    case Value::Kind::kDict: return v.as_dict().size() != 0;
    default: return true;
  }
}

std::string_view TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList:
      switch (v.as_list().kind) {
        case SequenceKind::kList: return "list";
        case SequenceKind::kTuple: return "tuple";
        case SequenceKind::kRange: return "range";
        case SequenceKind::kGenerator: return "generator";
        case SequenceKind::kDictKeys: return "dict_keys";
        case SequenceKind::kDictValues: return "dict_values";
        case SequenceKind::kDictItems: return "dict_items";
      }
      return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kLoop: return "LoopContext";
    case Value::Kind::kFunction: return "function";
  }
  return "object";
}

}  // namespace kiln::jinja
