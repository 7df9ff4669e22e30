// Proofs that two schemas share no value. Every helper over-approximates
// what a schema accepts (a keyword it does not understand is taken to
// accept everything), so "disjoint" and "invalid" are only ever claimed
// when true. A step budget bounds the work an untrusted schema can cause.
#include "grammar/schema_disjointness.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

// The value kinds a schema may accept, integers apart from other numbers.
enum : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64,  // numbers that are not whole
  kAnyKind = 127,
};

constexpr int kMaxDepth = 32;
constexpr int kStepBudget = 4096;

uint8_t KindOfValue(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return kNull;
    case Json::value_t::boolean: return kBoolean;
    case Json::value_t::object: return kObject;
    case Json::value_t::array: return kArray;
    case Json::value_t::string: return kString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return kInteger;
    case Json::value_t::number_float: {
      double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? kInteger : kFraction;
    }
    default: return kAnyKind;
  }
}

uint8_t KindsOfTypeName(const Json& name) {
  if (!name.is_string()) return kAnyKind;
  const std::string& n = name.get_ref<const std::string&>();
  if (n == "null") return kNull;
  if (n == "boolean") return kBoolean;
  if (n == "object") return kObject;
  if (n == "array") return kArray;
  if (n == "string") return kString;
  if (n == "integer") return kInteger;
  if (n == "number") return kInteger | kFraction;
  return kAnyKind;
}

// JSON Schema's equality: numbers by value, objects regardless of key order.
bool JsonEqual(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
    if (a.is_number_unsigned() || b.is_number_unsigned()) {
      const Json& u = a.is_number_unsigned() ? a : b;
      const Json& s = a.is_number_unsigned() ? b : a;
      return s.get<int64_t>() >= 0 && static_cast<uint64_t>(s.get<int64_t>()) == u.get<uint64_t>();
    }
    return a.get<int64_t>() == b.get<int64_t>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      auto it = b.find(key);
      if (it == b.end() || !JsonEqual(value, *it)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!JsonEqual(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

const Json* Member(const Json& schema, const char* key) {
  auto it = schema.find(key);
  return it == schema.end() ? nullptr : &*it;
}

// [lo, hi] of a number, each end open or closed.
struct Interval {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
};

Interval NumberBounds(const Json& s) {
  Interval r;
  auto tighten_lo = [&](const char* key, bool open) {
    const Json* v = Member(s, key);
    if (!v || !v->is_number()) return;
    double d = v->get<double>();
    if (d > r.lo || (d == r.lo && open)) {
      r.lo = d;
      r.lo_open = open;
    }
  };
  auto tighten_hi = [&](const char* key, bool open) {
    const Json* v = Member(s, key);
    if (!v || !v->is_number()) return;
    double d = v->get<double>();
    if (d < r.hi || (d == r.hi && open)) {
      r.hi = d;
      r.hi_open = open;
    }
  };
  tighten_lo("minimum", false);
  tighten_lo("exclusiveMinimum", true);
  tighten_hi("maximum", false);
  tighten_hi("exclusiveMaximum", true);
  return r;
}

bool Contains(const Interval& r, double d) {
  if (d < r.lo || (d == r.lo && r.lo_open)) return false;
  if (d > r.hi || (d == r.hi && r.hi_open)) return false;
  return true;
}

bool Overlap(const Interval& a, const Interval& b) {
  double lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
  if (lo < hi) return true;
  if (lo > hi) return false;
  return Contains(a, lo) && Contains(b, lo);
}

// A count's [min, max] from two keywords (minLength/maxLength, minItems/maxItems).
std::pair<double, double> CountBounds(const Json& s, const char* min_key, const char* max_key) {
  std::pair<double, double> r{0, std::numeric_limits<double>::infinity()};
  if (const Json* v = Member(s, min_key); v && v->is_number()) r.first = v->get<double>();
  if (const Json* v = Member(s, max_key); v && v->is_number()) r.second = v->get<double>();
  return r;
}

class Prover {
 public:
  explicit Prover(const SchemaRefResolver& resolve) : resolve_(resolve) {}

  // The kinds `s` may accept (a superset).
  uint8_t Kinds(const Json& schema, int depth) {
    const Json* s = Deref(schema, depth);
    if (!s) return kAnyKind;
    if (s->is_boolean()) return s->get<bool>() ? kAnyKind : 0;
    if (!s->is_object()) return kAnyKind;
    uint8_t kinds = kAnyKind;
    if (const Json* type = Member(*s, "type")) {
      if (type->is_array()) {
        uint8_t any = 0;
        for (const Json& t : *type) any |= KindsOfTypeName(t);
        kinds &= any;
      } else {
        kinds &= KindsOfTypeName(*type);
      }
    }
    if (const Json* c = Member(*s, "const")) kinds &= KindOfValue(*c);
    if (const Json* e = Member(*s, "enum"); e && e->is_array()) {
      uint8_t any = 0;
      for (const Json& v : *e) any |= KindOfValue(v);
      kinds &= any;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* branches = Member(*s, key); branches && branches->is_array()) {
        uint8_t any = 0;
        for (const Json& b : *branches) any |= Kinds(b, depth + 1);
        kinds &= any;
      }
    }
    if (const Json* all = Member(*s, "allOf"); all && all->is_array()) {
      for (const Json& m : *all) kinds &= Kinds(m, depth + 1);
    }
    return kinds;
  }

  bool Invalid(const Json& value, const Json& schema, int depth) {
    const Json* s = Deref(schema, depth);
    if (!s) return false;
    if (s->is_boolean()) return !s->get<bool>();
    if (!s->is_object()) return false;
    if (!(KindOfValue(value) & Kinds(*s, depth))) return true;
    if (const Json* c = Member(*s, "const"); c && !JsonEqual(value, *c)) return true;
    if (const Json* e = Member(*s, "enum"); e && e->is_array()) {
      bool found = false;
      for (const Json& v : *e) found = found || JsonEqual(value, v);
      if (!found) return true;
    }
    if (value.is_number() && !Contains(NumberBounds(*s), value.get<double>())) return true;
    if (value.is_string()) {
      auto [lo, hi] = CountBounds(*s, "minLength", "maxLength");
      auto n = static_cast<double>(CodePoints(value.get_ref<const std::string&>()));
      if (n < lo || n > hi) return true;
    }
    if (value.is_array()) {
      auto [lo, hi] = CountBounds(*s, "minItems", "maxItems");
      auto n = static_cast<double>(value.size());
      if (n < lo || n > hi) return true;
      const Json* items = Member(*s, "items");
      if (items && !items->is_array()) {
        for (const Json& item : value) {
          if (Invalid(item, *items, depth + 1)) return true;
        }
      }
    }
    if (value.is_object()) {
      if (const Json* required = Member(*s, "required"); required && required->is_array()) {
        for (const Json& name : *required) {
          if (name.is_string() && !value.contains(name.get_ref<const std::string&>())) return true;
        }
      }
      for (const auto& [key, member] : value.items()) {
        const Json* sub = PropertySchema(*s, key);
        if (sub && Invalid(member, *sub, depth + 1)) return true;
      }
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* branches = Member(*s, key); branches && branches->is_array()) {
        bool all_invalid = true;
        for (const Json& b : *branches) all_invalid = all_invalid && Invalid(value, b, depth + 1);
        if (all_invalid) return true;
      }
    }
    if (const Json* all = Member(*s, "allOf"); all && all->is_array()) {
      for (const Json& m : *all) {
        if (Invalid(value, m, depth + 1)) return true;
      }
    }
    return false;
  }

  bool Disjoint(const Json& schema_a, const Json& schema_b, int depth) {
    const Json* a = Deref(schema_a, depth);
    const Json* b = Deref(schema_b, depth);
    if (!a || !b) return false;
    if (!(Kinds(*a, depth) & Kinds(*b, depth))) return true;  // false schemas included
    if (!a->is_object() || !b->is_object()) return false;
    return OneSided(*a, *b, depth) || OneSided(*b, *a, depth) || PerKind(*a, *b, depth);
  }

 private:
  // Follows $refs (ignoring keywords beside them only widens the schema);
  // null when out of steps or unresolvable.
  const Json* Deref(const Json& schema, int depth) {
    if (--steps_ < 0 || depth > kMaxDepth) return nullptr;
    const Json* s = &schema;
    for (int hops = 0; s->is_object() && s->contains("$ref"); ++hops) {
      const Json& ref = (*s)["$ref"];
      if (hops > kMaxDepth || !ref.is_string()) return nullptr;
      s = resolve_(ref.get<std::string>());
      if (!s) return nullptr;
    }
    return s;
  }

  // The schema a member named `key` must satisfy; null when not known
  // (any value, as far as this proof goes).
  static const Json* PropertySchema(const Json& s, const std::string& key) {
    if (const Json* properties = Member(s, "properties"); properties && properties->is_object()) {
      auto it = properties->find(key);
      if (it != properties->end()) return &*it;
    }
    if (Member(s, "patternProperties")) return nullptr;
    return Member(s, "additionalProperties");
  }

  static std::vector<std::string> Required(const Json& s) {
    std::vector<std::string> names;
    if (const Json* required = Member(s, "required"); required && required->is_array()) {
      for (const Json& n : *required) {
        if (n.is_string()) names.push_back(n.get<std::string>());
      }
    }
    return names;
  }

  // Proofs from `a`'s combinators and values alone.
  bool OneSided(const Json& a, const Json& b, int depth) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* branches = Member(a, key); branches && branches->is_array()) {
        bool all = true;
        for (const Json& branch : *branches) all = all && Disjoint(branch, b, depth + 1);
        if (all) return true;
      }
    }
    if (const Json* members = Member(a, "allOf"); members && members->is_array()) {
      for (const Json& m : *members) {
        if (Disjoint(m, b, depth + 1)) return true;
      }
    }
    std::vector<const Json*> values;
    if (const Json* c = Member(a, "const")) {
      values.push_back(c);
    } else if (const Json* e = Member(a, "enum"); e && e->is_array()) {
      for (const Json& v : *e) values.push_back(&v);
    } else {
      return false;
    }
    for (const Json* v : values) {
      if (!Invalid(*v, b, depth + 1)) return false;
    }
    return true;
  }

  // Disjoint within every kind both may accept.
  bool PerKind(const Json& a, const Json& b, int depth) {
    const uint8_t common = Kinds(a, depth) & Kinds(b, depth);
    for (uint8_t kind = 1; kind < 128; kind = static_cast<uint8_t>(kind << 1)) {
      if (!(common & kind)) continue;
      bool disjoint = false;
      if (kind == kObject) {
        disjoint = ObjectsDisjoint(a, b, depth);
      } else if (kind == kInteger || kind == kFraction) {
        disjoint = !Overlap(NumberBounds(a), NumberBounds(b));
      } else if (kind == kString || kind == kArray) {
        const char* lo = kind == kString ? "minLength" : "minItems";
        const char* hi = kind == kString ? "maxLength" : "maxItems";
        auto ra = CountBounds(a, lo, hi), rb = CountBounds(b, lo, hi);
        disjoint = ra.second < rb.first || rb.second < ra.first;
      }
      if (!disjoint) return false;
    }
    return true;
  }

  bool ObjectsDisjoint(const Json& a, const Json& b, int depth) {
    std::vector<std::string> required_a = Required(a), required_b = Required(b);
    auto forbids = [&](const Json& s, const std::string& key) {
      const Json* sub = PropertySchema(s, key);
      return sub && Kinds(*sub, depth + 1) == 0;
    };
    for (const std::string& key : required_a) {
      if (forbids(b, key)) return true;
    }
    for (const std::string& key : required_b) {
      if (forbids(a, key)) return true;
    }
    for (const std::string& key : required_a) {
      if (std::find(required_b.begin(), required_b.end(), key) == required_b.end()) continue;
      const Json* sa = PropertySchema(a, key);
      const Json* sb = PropertySchema(b, key);
      if (sa && sb && Disjoint(*sa, *sb, depth + 1)) return true;
    }
    return false;
  }

  const SchemaRefResolver& resolve_;
  int steps_ = kStepBudget;
};

}  // namespace

bool SchemasProvablyDisjoint(const Json& a, const Json& b, const SchemaRefResolver& resolve) {
  return Prover(resolve).Disjoint(a, b, 0);
}

bool ValueProvablyInvalid(const Json& value, const Json& schema, const SchemaRefResolver& resolve) {
  return Prover(resolve).Invalid(value, schema, 0);
}

bool SchemaProvablyEmpty(const Json& schema, const SchemaRefResolver& resolve) {
  return Prover(resolve).Kinds(schema, 0) == 0;
}

bool SchemaWithinTypes(const Json& schema, const Json& type, const SchemaRefResolver& resolve) {
  const uint8_t kinds = Prover(resolve).Kinds(Json{{"type", type}}, 0);
  return (Prover(resolve).Kinds(schema, 0) & ~kinds) == 0;
}

}  // namespace kiln
