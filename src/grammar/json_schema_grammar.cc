// The schema walk: each subschema becomes a GBNF rule, $ref targets once
// each (so recursion becomes rule recursion), primitives from json_grammar.
#include "grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/json_input.h"
#include "core/utf8.h"
#include "grammar/gbnf_parser.h"
#include "grammar/gbnf_text.h"
#include "grammar/integer_range.h"
#include "grammar/json_grammar.h"
#include "grammar/regex_to_gbnf.h"
#include "grammar/schema_disjointness.h"

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

// Keywords that only describe: they never change which values are valid.
const std::set<std::string> kAnnotations = {
    "$schema",     "$id",         "$anchor",         "$comment",         "$vocabulary",   "title",
    "description", "default",     "examples",        "deprecated",       "readOnly",      "writeOnly",
    "$defs",       "definitions", "contentEncoding", "contentMediaType", "contentSchema", "strict",
    "name"};

// Keywords that constrain values in ways this converter does not express.
const std::set<std::string> kUnsupported = {"not",
                                            "if",
                                            "then",
                                            "else",
                                            "patternProperties",
                                            "propertyNames",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "dependencies",
                                            "minProperties",
                                            "maxProperties",
                                            "uniqueItems",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "multipleOf",
                                            "unevaluatedProperties",
                                            "unevaluatedItems",
                                            "$dynamicRef",
                                            "$recursiveRef",
                                            "$dynamicAnchor",
                                            "$recursiveAnchor"};

// Pairs of oneOf branches are compared, so their number is bounded.
constexpr size_t kMaxOneOfBranches = 64;

const std::map<std::string, std::string> kFormats = {
    {"date", R"("\"" json-date "\"")"},
    {"time", R"("\"" json-time "\"")"},
    {"date-time", R"("\"" json-date "T" json-time "\"")"},
    {"uuid",
     R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")"},
    {"email",
     R"("\"" [a-zA-Z0-9_+-] ([a-zA-Z0-9_+.-]{0,62} [a-zA-Z0-9_+-])? "@" [a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])? ("." [a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?){1,4} "\"")"},
};

// Dates that exist: years 0001 to 9999 (year 0 is not in the proleptic
// calendar most validators use), days by month, February 29th in leap
// years only (every fourth year, but of the centuries every fourth). A leap second only
// where it is valid, at 23:59:60 UTC (written with a zero offset).
const char* kFormatRules = R"gbnf(
json-date ::= json-year "-" ("0" [13578] | "1" [02]) "-" json-day-31 | json-year "-" ("0" [469] | "11") "-" json-day-30 | json-year "-02-" json-day-28 | json-leap-year "-02-29"
json-year ::= [0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000"
json-leap-year ::= [0-9] [0-9] ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00"
json-day-28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
json-day-30 ::= json-day-28 | "29" | "30"
json-day-31 ::= json-day-30 | "31"
json-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]) | "23:59:60" ("." [0-9]{1,9})? ("Z" | [+-] "00:00")
)gbnf";

std::string Pointer(const std::string& path, const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped.push_back(c);
    }
  }
  return path + "/" + escaped;
}

// A URI fragment's %XX escapes decoded ("#/a%25b" points at the key "a%b").
std::string PercentDecoded(const std::string& text) {
  std::string out;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

class SchemaConverter {
 public:
  explicit SchemaConverter(const Json& root) : root_(root) {}

  Expected<std::string> Convert() {
    KILN_ASSIGN_OR_RETURN(std::string root, Visit(root_, "#", 0));
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    out += JsonPrimitiveRules();
    out += kFormatRules;
    return out;
  }

 private:
  // A GBNF expression (a rule name or a literal) for the values `schema`
  // accepts; `path` names it in errors.
  Expected<std::string> Visit(const Json& schema, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth)
      return Error(path, fmt::format("schemas nested deeper than {}", kMaxSchemaDepth));
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return std::string("json-value");
      return Error(path, "schema false accepts no value");
    }
    if (!schema.is_object()) return Error(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (kUnsupported.count(key))
        return Error(Pointer(path, key), fmt::format("keyword '{}' is not supported", key));
    }
    if (const Json* ref = Find(schema, "$ref")) return Ref(*ref, schema, path, depth);
    if (schema.contains("const") || schema.contains("enum")) return Values(schema, path);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* branches = Find(schema, key)) return Branches(*branches, key, schema, path, depth);
    }
    if (const Json* all = Find(schema, "allOf")) return AllOf(*all, schema, path, depth);

    const Json* type = Find(schema, "type");
    if (type && type->is_array()) {
      if (type->empty()) return Error(Pointer(path, "type"), "an empty list of types accepts no value");
      std::vector<std::string> alternatives;
      for (const Json& t : *type) {
        if (!t.is_string()) return Error(Pointer(path, "type"), "types must be strings");
        KILN_ASSIGN_OR_RETURN(std::string branch, Typed(t.get<std::string>(), schema, path, depth));
        alternatives.push_back(branch);
      }
      return NewRule(path, Join(alternatives, " | "));
    }
    if (type && !type->is_string())
      return Error(Pointer(path, "type"), "type must be a string or a list of strings");
    return Typed(type ? type->get<std::string>() : ImpliedType(schema), schema, path, depth);
  }

  Expected<std::string> Typed(const std::string& type, const Json& schema, const std::string& path,
                              int depth) {
    if (type == "object") return Object(schema, path, depth);
    if (type == "array") return Array(schema, path, depth);
    if (type == "string") return String(schema, path);
    if (type == "integer") return Integer(schema, path);
    if (type == "number") return Number(schema, path);
    if (type == "boolean") return std::string("json-boolean");
    if (type == "null") return std::string("json-null");
    if (type == "any") return std::string("json-value");
    return Error(Pointer(path, "type"), fmt::format("unknown type '{}'", type));
  }

  static std::string ImpliedType(const Json& schema) {
    for (const char* key : {"properties", "required", "additionalProperties"}) {
      if (schema.contains(key)) return "object";
    }
    for (const char* key : {"items", "prefixItems", "minItems", "maxItems", "additionalItems"}) {
      if (schema.contains(key)) return "array";
    }
    for (const char* key : {"pattern", "format", "minLength", "maxLength"}) {
      if (schema.contains(key)) return "string";
    }
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (schema.contains(key)) return "number";
    }
    return "any";
  }

  // ---- const, enum, anyOf, oneOf ----

  // const and enum, beside which only `type` may constrain: the values
  // that satisfy all three.
  Expected<std::string> Values(const Json& schema, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
      if (key != "const" && key != "enum" && key != "type" && !kAnnotations.count(key)) {
        return Error(Pointer(path, key),
                     fmt::format("keyword '{}' beside const or enum is not supported", key));
      }
    }
    const Json* e = Find(schema, "enum");
    if (e && (!e->is_array() || e->empty()))
      return Error(Pointer(path, "enum"), "enum must be a non-empty array");
    std::vector<const Json*> candidates;
    if (const Json* c = Find(schema, "const")) {
      candidates.push_back(c);
    } else {
      for (const Json& v : *e) candidates.push_back(&v);
    }
    std::vector<std::string> alternatives;
    for (const Json* v : candidates) {
      // For these keywords the check is exact, not only sound.
      if (!ValueProvablyInvalid(*v, schema, Resolver())) alternatives.push_back(ConstLiteral(*v));
    }
    if (alternatives.empty()) return Error(path, "no value of const or enum satisfies the schema's type");
    if (alternatives.size() == 1) return alternatives[0];
    return NewRule(path, Join(alternatives, " | "));
  }

  // anyOf, or oneOf when its branches provably exclude each other: a value
  // written for one branch then matches no other, so exactly one. A `type`
  // beside them narrows every branch; false branches are left out.
  Expected<std::string> Branches(const Json& branches, const char* key, const Json& schema,
                                 const std::string& path, int depth) {
    const std::string at = Pointer(path, key);
    if (!branches.is_array() || branches.empty()) return Error(at, "must be a non-empty array");
    KILN_RETURN_IF_ERROR(OnlyAnnotationsBeside(schema, key, path));
    const bool one_of = std::string(key) == "oneOf";
    if (one_of && branches.size() > kMaxOneOfBranches) {
      return Error(at, fmt::format("oneOf with more than {} branches is not supported", kMaxOneOfBranches));
    }
    const Json* base_type = Find(schema, "type");
    std::vector<const Json*> kept;
    std::vector<std::string> kept_paths;
    for (size_t i = 0; i < branches.size(); ++i) {
      std::string branch_path = Pointer(at, std::to_string(i));
      const Json* branch = &branches[i];
      if (branch->is_boolean() && !branch->get<bool>()) continue;  // matches nothing
      if (base_type) {
        KILN_ASSIGN_OR_RETURN(branch, WithBaseType(*branch, *base_type, branch_path));
        if (branch == nullptr) continue;  // none of its types is allowed
      }
      kept.push_back(branch);
      kept_paths.push_back(branch_path);
    }
    if (kept.empty()) return Error(at, "no branch accepts a value");
    if (one_of) {
      for (size_t i = 0; i < kept.size(); ++i) {
        for (size_t j = i + 1; j < kept.size(); ++j) {
          if (!SchemasProvablyDisjoint(*kept[i], *kept[j], Resolver())) {
            return Error(
                at, fmt::format("oneOf needs a value to match exactly one branch, and {} and {} may both "
                                "match one; only branches that provably exclude each other (by type, "
                                "const or enum values, a property one requires and the other forbids, "
                                "disjoint bounds) are supported",
                                kept_paths[i], kept_paths[j]));
          }
        }
      }
    }
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < kept.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(std::string rule, Visit(*kept[i], kept_paths[i], depth + 1));
      alternatives.push_back(rule);
    }
    if (alternatives.size() == 1) return alternatives[0];
    return NewRule(path, Join(alternatives, " | "));
  }

  // `branch` narrowed to the types `type` allows: itself when it accepts no
  // other type anyway, else a copy with the intersected `type`; null when
  // no type is left.
  Expected<const Json*> WithBaseType(const Json& branch, const Json& type, const std::string& path) {
    if (!type.is_string() && !type.is_array())
      return Error(path, "type must be a string or a list of strings");
    if (SchemaWithinTypes(branch, type, Resolver())) return &branch;
    if (branch.is_boolean()) return Keep(Json{{"type", type}});
    for (const char* key : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (branch.is_object() && branch.contains(key)) {
        return Error(
            Pointer(path, key),
            fmt::format("a branch with '{}' that may accept types the 'type' beside it excludes is not "
                        "supported",
                        key));
      }
    }
    if (!branch.is_object()) return Error(path, "a schema must be an object or a boolean");
    std::vector<std::string> allowed = TypeNames(type);
    Json narrowed = branch;
    if (const Json* own = Find(branch, "type")) {
      std::vector<std::string> both;
      for (const std::string& t : TypeNames(*own)) {
        for (const std::string& u : allowed) {
          if (t == u || (t == "number" && u == "integer")) both.push_back(u);
          if (t == "integer" && u == "number") both.push_back(t);
        }
      }
      allowed = both;
    }
    if (allowed.empty()) return nullptr;
    narrowed["type"] = allowed.size() == 1 ? Json(allowed[0]) : Json(allowed);
    if (SchemaProvablyEmpty(narrowed, Resolver())) return nullptr;  // e.g. a const of another type
    return Keep(std::move(narrowed));
  }

  static std::vector<std::string> TypeNames(const Json& type) {
    std::vector<std::string> names;
    if (type.is_string()) names.push_back(type.get<std::string>());
    if (type.is_array()) {
      for (const Json& t : type) {
        if (t.is_string()) names.push_back(t.get<std::string>());
      }
    }
    return names;
  }

  // Keeps a schema made here alive while rules refer to it.
  const Json* Keep(Json schema) {
    merged_.push_back(std::make_unique<Json>(std::move(schema)));
    return merged_.back().get();
  }

  // $ref resolution for the proofs in schema_disjointness.h.
  SchemaRefResolver Resolver() {
    return [this](const std::string& ref) -> const Json* {
      Expected<const Json*> target = Resolve(ref, "#");
      return target.ok() ? *target : nullptr;
    };
  }

  // ---- $ref, allOf ----

  Expected<std::string> Ref(const Json& ref, const Json& schema, const std::string& path, int depth) {
    std::string at = Pointer(path, "$ref");
    if (!ref.is_string()) return Error(at, "$ref must be a string");
    for (const auto& [key, value] : schema.items()) {
      if (key != "$ref" && !kAnnotations.count(key)) {
        return Error(Pointer(path, key), fmt::format("keyword '{}' beside $ref is not supported", key));
      }
    }
    std::string target = ref.get<std::string>();
    auto known = ref_rules_.find(target);
    if (known != ref_rules_.end()) return known->second;  // being or already defined: recursion
    KILN_ASSIGN_OR_RETURN(const Json* resolved, Resolve(target, at));
    std::string name = UniqueName(target == "#" ? "root-ref" : target.substr(target.rfind('/') + 1));
    ref_rules_[target] = name;
    KILN_ASSIGN_OR_RETURN(std::string body, Visit(*resolved, target, depth + 1));
    rules_[name] = body;
    return name;
  }

  Expected<const Json*> Resolve(const std::string& target, const std::string& at) {
    if (target.empty() || target[0] != '#') {
      return Error(at, fmt::format("$ref '{}' points outside the schema, which is not supported", target));
    }
    const Json* node = &root_;
    size_t pos = 1;
    while (pos < target.size()) {
      if (target[pos] != '/') return Error(at, fmt::format("$ref '{}' is not a JSON pointer", target));
      size_t end = target.find('/', pos + 1);
      if (end == std::string::npos) end = target.size();
      std::string token = PercentDecoded(target.substr(pos + 1, end - pos - 1));
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
          key.push_back(token[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          key.push_back(token[i]);
        }
      }
      if (node->is_object() && node->contains(key)) {
        node = &(*node)[key];
      } else if (node->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos && key.size() < 9 &&
                 std::stoul(key) < node->size()) {
        node = &(*node)[std::stoul(key)];
      } else {
        return Error(at, fmt::format("$ref '{}' does not resolve", target));
      }
      pos = end;
    }
    return node;
  }

  // allOf whose members are all object schemas: one object with their
  // properties and required names together. A property in several members
  // must satisfy each member's schema (nested as allOf); a member with
  // additionalProperties false allows only its own property names.
  Expected<std::string> AllOf(const Json& all, const Json& schema, const std::string& path, int depth) {
    std::string at = Pointer(path, "allOf");
    if (!all.is_array() || all.empty()) return Error(at, "allOf must be a non-empty array");
    // The keywords beside allOf constrain the same value: one more member.
    Json beside = Json::object();
    for (const auto& [key, value] : schema.items()) {
      if (key != "allOf" && !kAnnotations.count(key) && key != "type") beside[key] = value;
    }
    if (!beside.empty()) {
      Json members = all;
      if (const Json* type = Find(schema, "type")) beside["type"] = *type;
      members.push_back(std::move(beside));
      Json combined = Json::object();
      for (const auto& [key, value] : schema.items()) {
        if (kAnnotations.count(key)) combined[key] = value;
      }
      combined["allOf"] = std::move(members);
      const Json* kept = Keep(std::move(combined));
      return AllOf((*kept)["allOf"], *kept, path, depth);
    }
    if (const Json* type = Find(schema, "type")) {
      std::vector<std::string> names = TypeNames(*type);
      if (std::find(names.begin(), names.end(), "object") == names.end()) {
        return Error(Pointer(path, "type"),
                     "allOf is supported only for objects, and this type excludes them");
      }
    }
    Json merged = Json::object();
    merged["type"] = "object";
    merged["properties"] = Json::object();
    merged["required"] = Json::array();
    std::vector<const Json*> closed;  // the properties of members with additionalProperties false
    std::vector<std::string> closed_paths;
    size_t true_members = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const Json* part = &all[i];
      std::string part_path = Pointer(at, std::to_string(i));
      if (part->is_boolean() && part->get<bool>()) {  // constrains nothing
        ++true_members;
        continue;
      }
      for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
        if (hops > kMaxSchemaDepth) return Error(part_path, "$ref chain too long");
        const Json& ref = (*part)["$ref"];
        if (!ref.is_string()) return Error(Pointer(part_path, "$ref"), "$ref must be a string");
        KILN_ASSIGN_OR_RETURN(part, Resolve(ref.get<std::string>(), part_path));
      }
      if (all.size() == 1 && schema.size() == 1) return Visit(*part, part_path, depth + 1);
      if (part->is_object()) {  // named as anywhere else, before the shape is judged
        for (const auto& [key, value] : part->items()) {
          if (kUnsupported.count(key))
            return Error(Pointer(part_path, key), fmt::format("keyword '{}' is not supported", key));
        }
      }
      if (!part->is_object() || ImpliedOrGivenType(*part) != "object") {
        return Error(part_path, "allOf is supported only when every member is an object schema");
      }
      bool closes = false;
      for (const auto& [key, value] : part->items()) {
        if (key == "properties") {
          if (!value.is_object()) return Error(Pointer(part_path, key), "must be an object");
          Json& properties = merged["properties"];
          for (const auto& [name, sub] : value.items()) {
            if (!properties.contains(name)) {
              properties[name] = sub;
            } else if (properties[name] != sub) {
              properties[name] = Json{{"allOf", Json::array({properties[name], sub})}};
            }
          }
        } else if (key == "required") {
          if (!value.is_array()) return Error(Pointer(part_path, key), "must be an array");
          for (const Json& name : value) merged["required"].push_back(name);
        } else if (key == "additionalProperties") {
          if (!value.is_boolean() || value.get<bool>()) {
            if (value.is_boolean()) continue;
            return Error(Pointer(part_path, key),
                         "allOf members with additionalProperties schemas are not supported");
          }
          closes = true;
        } else if (key != "type" && !kAnnotations.count(key)) {
          return Error(Pointer(part_path, key),
                       fmt::format("keyword '{}' inside allOf is not supported", key));
        }
      }
      if (closes) {
        static const Json kNoProperties = Json::object();
        const Json* own = Find(*part, "properties");
        closed.push_back(own ? own : &kNoProperties);
        closed_paths.push_back(part_path);
      }
    }
    if (true_members == all.size()) return Visit(Json(true), at, depth + 1);
    if (!closed.empty()) {
      // Only names every closed member declares may appear at all.
      auto allowed = [&](const std::string& name, std::string* forbidder) {
        for (size_t c = 0; c < closed.size(); ++c) {
          if (!closed[c]->contains(name)) {
            *forbidder = closed_paths[c];
            return false;
          }
        }
        return true;
      };
      std::string forbidder;
      for (const Json& name : merged["required"]) {
        if (name.is_string() && !allowed(name.get<std::string>(), &forbidder)) {
          return Error(at,
                       fmt::format("required property '{}' is forbidden by {}'s additionalProperties false",
                                   name.get<std::string>(), forbidder));
        }
      }
      Json kept = Json::object();
      for (const auto& [name, sub] : merged["properties"].items()) {
        if (allowed(name, &forbidder)) kept[name] = sub;
      }
      merged["properties"] = std::move(kept);
      merged["additionalProperties"] = false;
    }
    return Object(*Keep(std::move(merged)), path, depth);
  }

  static std::string ImpliedOrGivenType(const Json& schema) {
    const Json* type = Find(schema, "type");
    if (type && type->is_string()) return type->get<std::string>();
    return ImpliedType(schema);
  }

  // ---- objects ----

  Expected<std::string> Object(const Json& schema, const std::string& path, int depth) {
    const Json* properties = Find(schema, "properties");
    const Json* required = Find(schema, "required");
    const Json* additional = Find(schema, "additionalProperties");
    if (properties && !properties->is_object())
      return Error(Pointer(path, "properties"), "must be an object");
    if (required && !required->is_array()) return Error(Pointer(path, "required"), "must be an array");
    if (!properties && !required && !additional) return std::string("json-object");

    std::set<std::string> required_names;
    std::vector<std::string> declared;  // in the schema's order
    if (required) {
      for (const Json& name : *required) {
        if (!name.is_string()) return Error(Pointer(path, "required"), "names must be strings");
        required_names.insert(name.get<std::string>());
      }
    }
    if (properties) {
      for (const auto& [name, sub] : properties->items()) declared.push_back(name);
    }
    for (const std::string& name : required_names) {
      if (!properties || !properties->contains(name)) declared.push_back(name);  // required, any value
    }

    struct Member {
      std::string rule;
      bool required;
    };
    std::vector<Member> members;
    for (int pass = 0; pass < 2; ++pass) {  // required first, then optional
      for (const std::string& name : declared) {
        bool is_required = required_names.count(name) > 0;
        if (is_required != (pass == 0)) continue;
        // A name without its own schema is an additional property.
        const bool own = properties && properties->contains(name);
        const Json* sub = own ? &(*properties)[name] : additional;
        std::string sub_path =
            own ? Pointer(Pointer(path, "properties"), name) : Pointer(path, "additionalProperties");
        if (sub && sub->is_boolean() && !sub->get<bool>()) {
          if (is_required) {
            return Error(Pointer(path, "required"),
                         fmt::format("required property '{}' is forbidden by {}", name, sub_path));
          }
          continue;  // never written; still declared, so no extra key takes its name
        }
        std::string value = "json-value";
        if (sub && !sub->is_boolean()) {
          KILN_ASSIGN_OR_RETURN(value, Visit(*sub, sub_path, depth + 1));
        }
        std::string key = GbnfLiteral(Json(name).dump());
        members.push_back(
            {NewRule(path + "-" + name, key + " json-ws \":\" json-ws " + value + " json-ws"), is_required});
      }
    }

    std::string extra;  // one additional member, or empty when none are allowed
    if (!additional || !additional->is_boolean() || additional->get<bool>()) {
      std::string value = "json-value";
      if (additional && additional->is_object()) {
        KILN_ASSIGN_OR_RETURN(value, Visit(*additional, Pointer(path, "additionalProperties"), depth + 1));
      } else if (additional && !additional->is_boolean()) {
        return Error(Pointer(path, "additionalProperties"), "must be a boolean or a schema");
      }
      std::string key = OtherKey(declared, path);
      extra = NewRule(path + "-extra", key + " json-ws \":\" json-ws " + value + " json-ws");
    }

    // Required members in order, then each optional one or not, then any
    // number of extra members; commas only between members that are there.
    std::vector<std::string> req;
    std::vector<std::string> opt;
    for (const Member& m : members) (m.required ? req : opt).push_back(m.rule);
    // rest_i: optional members i.. each after a comma; first_i: the same when
    // nothing came before (so the first present one has no comma).
    std::string rest = extra.empty() ? "" : "(\",\" json-ws " + extra + ")*";
    std::string first = extra.empty() ? "" : "(" + extra + " (\",\" json-ws " + extra + ")*)?";
    for (size_t i = opt.size(); i-- > 0;) {
      std::string next_rest = rest, next_first = first;
      rest =
          NewRule(path + "-rest", "(\",\" json-ws " + opt[i] + ")? " + (next_rest.empty() ? "" : next_rest));
      first = NewRule(path + "-first",
                      opt[i] + " " + next_rest + (next_first.empty() ? " | " : " | " + next_first) + "");
    }
    std::string body;
    if (!req.empty()) {
      body = Join(req, " \",\" json-ws ") + " " + rest;
    } else {
      body = first;
    }
    return NewRule(path, "\"{\" json-ws " + body + " \"}\"");
  }

  // A JSON key other than `declared`: written without escapes, its
  // characters walked along a trie of the declared names.
  std::string OtherKey(const std::vector<std::string>& declared, const std::string& path) {
    struct Node {
      std::map<char32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : declared) {
      size_t node = 0;
      for (size_t i = 0; i < name.size();) {
        char32_t cp;
        i += DecodeUtf8At(name, i, &cp);
        auto it = trie[node].children.find(cp);
        if (it == trie[node].children.end()) {
          trie.emplace_back();
          it = trie[node].children.emplace(cp, trie.size() - 1).first;
        }
        node = it->second;
      }
      trie[node].terminal = true;
    }
    std::string free_chars = "[^\"\\\\\\x00-\\x1F]*";
    std::vector<std::string> names(trie.size());
    for (size_t n = 0; n < trie.size(); ++n) names[n] = UniqueName(GbnfRuleName(path) + "-key");
    for (size_t n = 0; n < trie.size(); ++n) {
      std::vector<std::string> alternatives;
      if (!trie[n].terminal) alternatives.push_back("\"\"");
      std::string others = "[^\"\\\\\\x00-\\x1F";
      for (const auto& [cp, child] : trie[n].children) others += GbnfClassChar(cp);
      alternatives.push_back(others + "] " + free_chars);
      for (const auto& [cp, child] : trie[n].children) {
        std::string utf8;
        AppendUtf8(utf8, cp);
        alternatives.push_back(GbnfLiteral(utf8) + " " + names[child]);
      }
      rules_[names[n]] = Join(alternatives, " | ");
    }
    return "\"\\\"\" " + names[0] + " \"\\\"\"";
  }

  // ---- arrays ----

  Expected<std::string> Array(const Json& schema, const std::string& path, int depth) {
    KILN_ASSIGN_OR_RETURN(int64_t min_items, Count(schema, "minItems", 0, path));
    KILN_ASSIGN_OR_RETURN(int64_t max_items, Count(schema, "maxItems", -1, path));
    if (max_items >= 0 && max_items < min_items) return Error(path, "maxItems is below minItems");
    const Json* prefix = Find(schema, "prefixItems");
    const Json* items = Find(schema, "items");
    const Json* additional_items = Find(schema, "additionalItems");
    std::string prefix_path = Pointer(path, "prefixItems");
    if (items && items->is_array()) {  // draft-07 tuple form
      prefix = items;
      prefix_path = Pointer(path, "items");
      items = additional_items;
    }
    // Otherwise additionalItems has no effect: draft-07 ignores it beside an
    // items schema (or none), and 2020-12 has no such keyword.
    if (prefix && !prefix->is_array()) return Error(prefix_path, "must be an array");

    std::vector<std::string> tuple;
    bool tuple_closed = false;  // a false entry: no element may be at its place, so none after it
    if (prefix) {
      for (size_t i = 0; i < prefix->size(); ++i) {
        const Json& entry = (*prefix)[i];
        if (entry.is_boolean() && !entry.get<bool>()) {
          tuple_closed = true;
          break;
        }
        KILN_ASSIGN_OR_RETURN(std::string rule,
                              Visit(entry, Pointer(prefix_path, std::to_string(i)), depth + 1));
        tuple.push_back(rule);
      }
    }
    std::string item;  // the schema of items after the tuple; empty when none may follow
    if (!tuple_closed && (!items || !items->is_boolean() || items->get<bool>())) {
      if (items && !items->is_boolean()) {
        KILN_ASSIGN_OR_RETURN(item, Visit(*items, Pointer(path, "items"), depth + 1));
      } else {
        item = "json-value";
      }
    }
    auto n = static_cast<int64_t>(tuple.size());
    if (item.empty()) {
      if (min_items > n) return Error(path, "minItems exceeds the items the tuple allows");
      if (max_items < 0 || max_items > n) max_items = n;
    }
    if (max_items > static_cast<int64_t>(kMaxGrammarRepetition) ||
        min_items > static_cast<int64_t>(kMaxGrammarRepetition)) {
      return Error(path, fmt::format("item counts above {} are not supported", kMaxGrammarRepetition));
    }
    // Element i of the array: tuple[i], or item past the tuple.
    auto element = [&](int64_t i) { return i < n ? tuple[static_cast<size_t>(i)] : item; };
    // tail(i): elements i.. after a comma each, optional from min_items on.
    std::string tail;
    // Elements spelled out one by one; past them an unbounded array repeats.
    int64_t last = max_items < 0 ? std::max<int64_t>({n, min_items, 1}) : max_items;
    if (max_items < 0) tail = "(\",\" json-ws " + item + " json-ws)*";
    for (int64_t i = last; i-- > 1;) {
      std::string piece = "\",\" json-ws " + element(i) + " json-ws " + tail;
      tail = i >= min_items ? NewRule(path + "-tail", "(" + piece + ")?") : NewRule(path + "-tail", piece);
      if (rules_.size() > kMaxSchemaRules) return Error(path, "the schema needs too many grammar rules");
    }
    std::string body;
    if (last == 0) {
      body = "";
    } else {
      std::string elements = element(0) + " json-ws " + tail;
      body = min_items >= 1 ? elements : "(" + elements + ")?";
    }
    return NewRule(path, "\"[\" json-ws " + body + " \"]\"");
  }

  // ---- scalars ----

  Expected<std::string> String(const Json& schema, const std::string& path) {
    KILN_ASSIGN_OR_RETURN(int64_t min_length, Count(schema, "minLength", 0, path));
    KILN_ASSIGN_OR_RETURN(int64_t max_length, Count(schema, "maxLength", -1, path));
    const Json* pattern = Find(schema, "pattern");
    const Json* format = Find(schema, "format");
    bool lengths = min_length > 0 || max_length >= 0;
    if (pattern && format) return Error(path, "pattern together with format is not supported");
    if ((pattern || format) && lengths)
      return Error(path, "minLength/maxLength together with pattern or format is not supported");
    if (pattern) {
      if (!pattern->is_string()) return Error(Pointer(path, "pattern"), "must be a string");
      Expected<std::string> body = RegexToGbnf(pattern->get<std::string>());
      if (!body.ok()) return Error(Pointer(path, "pattern"), body.status().message());
      return NewRule(path, "\"\\\"\" " + *body + " \"\\\"\"");
    }
    if (format) {
      if (!format->is_string()) return Error(Pointer(path, "format"), "must be a string");
      auto known = kFormats.find(format->get<std::string>());
      if (known == kFormats.end()) {
        return Error(Pointer(path, "format"),
                     fmt::format("format '{}' is not supported", format->get<std::string>()));
      }
      return NewRule(path, known->second);
    }
    if (!lengths) return std::string("json-string");
    if (max_length >= 0 && max_length < min_length) return Error(path, "maxLength is below minLength");
    if (min_length > static_cast<int64_t>(kMaxGrammarRepetition) ||
        max_length > static_cast<int64_t>(kMaxGrammarRepetition)) {
      return Error(path, fmt::format("string lengths above {} are not supported", kMaxGrammarRepetition));
    }
    std::string count = max_length < 0 ? fmt::format("{{{},}}", min_length)
                                       : fmt::format("{{{},{}}}", min_length, max_length);
    return NewRule(path, "\"\\\"\" json-char" + count + " \"\\\"\"");
  }

  Expected<std::string> Integer(const Json& schema, const std::string& path) {
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      const Json* v = Find(schema, key);
      if (!v) continue;
      if (!v->is_number())
        return Error(Pointer(path, key), "must be a number (draft-04's boolean form is not supported)");
      double d = v->get<double>();
      // Past the 16 digits an integer may have, a bound changes nothing.
      d = std::clamp(d, -1e17, 1e17);
      std::string k = key;
      auto floor_d = static_cast<int64_t>(std::floor(d)), ceil_d = static_cast<int64_t>(std::ceil(d));
      if (k == "minimum") lo = std::max(lo.value_or(INT64_MIN), ceil_d);
      if (k == "exclusiveMinimum") lo = std::max(lo.value_or(INT64_MIN), floor_d + 1);
      if (k == "maximum") hi = std::min(hi.value_or(INT64_MAX), floor_d);
      if (k == "exclusiveMaximum") hi = std::min(hi.value_or(INT64_MAX), ceil_d - 1);
    }
    if (!lo && !hi) return std::string("json-integer");
    int64_t low = std::max(lo.value_or(-kMaxJsonInteger), -kMaxJsonInteger);
    int64_t high = std::min(hi.value_or(kMaxJsonInteger), kMaxJsonInteger);
    if (high < low) return Error(path, "the integer bounds leave no value");
    return NewRule(path, IntegerRangeGbnf(low, high));
  }

  // A bound of a number, possibly exclusive.
  struct NumberBound {
    double value;
    bool open = false;
  };

  Expected<std::string> Number(const Json& schema, const std::string& path) {
    const auto max = static_cast<double>(kMaxJsonInteger);
    NumberBound lo{-max}, hi{max};
    bool bounded = false;
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      const Json* v = Find(schema, key);
      if (!v) continue;
      if (!v->is_number()) {
        return Error(Pointer(path, key), "must be a number (draft-04's boolean form is not supported)");
      }
      const std::string k = key;
      NumberBound b{std::clamp(v->get<double>(), -max, max), k.rfind("exclusive", 0) == 0};
      if (b.open && b.value != std::floor(b.value)) {
        return Error(Pointer(path, key),
                     "exclusive number bounds that are not whole numbers are not supported");
      }
      bounded = true;
      // The tighter bound wins; at equal values the exclusive one.
      if (k == "minimum" || k == "exclusiveMinimum") {
        if (b.value > lo.value || (b.value == lo.value && b.open)) lo = b;
      } else if (b.value < hi.value || (b.value == hi.value && b.open)) {
        hi = b;
      }
    }
    if (!bounded) return std::string("json-number");
    if (hi.value < lo.value || (hi.value == lo.value && (lo.open || hi.open))) {
      return Error(path, "the number bounds leave no value");
    }
    std::string range = NumberRangeGbnf(lo, hi);
    if (range.empty()) return Error(path, "the number bounds leave no value of 15 significant digits");
    return NewRule(path, range);
  }

  // A non-negative number's decimal digits: the whole part, and the
  // fraction's digits without trailing zeros.
  struct Decimal {
    int64_t whole = 0;
    std::string fraction;
  };

  // REQUIRES: 0 <= magnitude <= kMaxJsonInteger. The shortest text that
  // reads back as the same double, as validators read the bound.
  static Decimal ToDecimal(double magnitude) {
    std::string text = fmt::format("{}", magnitude);  // "12.5", "1e-05", "1e+16"
    int exponent = 0;
    if (size_t e = text.find_first_of("eE"); e != std::string::npos) {
      exponent = std::stoi(text.substr(e + 1));
      text.resize(e);
    }
    size_t point = text.find('.');
    std::string digits = text;
    int point_at = static_cast<int>(text.size());
    if (point != std::string::npos) {
      digits = text.substr(0, point) + text.substr(point + 1);
      point_at = static_cast<int>(point);
    }
    point_at += exponent;
    if (point_at < 0) {
      digits.insert(0, static_cast<size_t>(-point_at), '0');
      point_at = 0;
    }
    if (point_at > static_cast<int>(digits.size())) digits.append(point_at - digits.size(), '0');
    Decimal d;
    const std::string whole = digits.substr(0, static_cast<size_t>(point_at));
    d.whole = whole.empty() ? 0 : std::stoll(whole);
    d.fraction = digits.substr(static_cast<size_t>(point_at));
    while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
    return d;
  }

  // A limit on a fraction 0.D: absent, or digits (no trailing zeros) and
  // whether the limit itself is excluded.
  struct FractionLimit {
    bool present = false;
    std::string digits;
    bool open = false;

    FractionLimit Tail() const { return {present, digits.empty() ? "" : digits.substr(1), open}; }
    int First() const { return digits.empty() ? 0 : digits[0] - '0'; }
  };

  // The digit strings D of 0 to n digits with lower <= 0.D <= upper (or <):
  // whether the empty one is among them, and an expression for the others
  // ("" when none).
  static std::pair<bool, std::string> FractionDigits(const FractionLimit& lower, const FractionLimit& upper,
                                                     int n) {
    bool empty_ok = (!lower.present || (lower.digits.empty() && !lower.open)) &&
                    (!upper.present || !upper.digits.empty() || !upper.open);
    if (n <= 0) return {empty_ok, ""};
    if (!lower.present && !upper.present) return {true, fmt::format("[0-9]{{1,{}}}", n)};
    const int first = lower.present ? lower.First() : 0;
    const int last = upper.present ? upper.First() : 9;
    std::vector<std::string> alternatives;
    // digit, then the rest of 0 to n - 1 digits under the limits that still bind.
    auto then = [&](int digit, const FractionLimit& low, const FractionLimit& high) {
      auto [rest_empty_ok, rest] = FractionDigits(low, high, n - 1);
      std::string d = GbnfLiteral(std::string(1, static_cast<char>('0' + digit)));
      if (rest.empty()) {
        if (rest_empty_ok) alternatives.push_back(d);
      } else {
        alternatives.push_back(d + " " + (rest_empty_ok ? "(" + rest + ")?" : "(" + rest + ")"));
      }
    };
    if (first == last) {
      then(first, lower.Tail(), upper.Tail());
    } else if (first < last) {
      then(first, lower.Tail(), FractionLimit{});
      if (first + 1 <= last - 1) {
        alternatives.push_back(fmt::format("[{}-{}]", first + 1, last - 1) +
                               (n > 1 ? fmt::format(" [0-9]{{0,{}}}", n - 1) : ""));
      }
      then(last, FractionLimit{}, upper.Tail());
    }
    return {empty_ok, Join(alternatives, " | ")};
  }

  // The fraction part (with its ".") written after a whole part; `ok` false
  // when no fraction, not even none, satisfies the limits.
  static std::string FractionPart(const FractionLimit& lower, const FractionLimit& upper, int n, bool* ok) {
    auto [empty_ok, digits] = FractionDigits(lower, upper, n);
    *ok = empty_ok || !digits.empty();
    if (digits.empty()) return "";
    return empty_ok ? " (\".\" (" + digits + "))?" : " \".\" (" + digits + ")";
  }

  // Numbers between two bounds (each inclusive or not; exclusive ones
  // whole) written without an exponent. On each side of zero, magnitudes
  // from a to b: whole parts strictly between with any fraction, a's and
  // b's whole parts with the fractions their bounds allow. Negative values
  // mirror that. Beside an open bound the digits are kept to 15 significant
  // ones, so that the value read as a double (as validators read it) still
  // differs from the bound; inclusive bounds need no such care, as reading
  // keeps the order.
  static std::string NumberRangeGbnf(NumberBound lo, NumberBound hi) {
    int fraction_digits = 16;
    for (const NumberBound& b : {lo, hi}) {
      if (!b.open) continue;
      auto whole_digits =
          static_cast<int>(fmt::format("{}", std::llabs(static_cast<int64_t>(b.value))).size());
      fraction_digits = std::min(fraction_digits, std::max(0, 15 - whole_digits));
    }
    // REQUIRES: 0 <= a <= b.
    auto magnitudes = [&](double a, bool a_open, double b, bool b_open) {
      const Decimal da = ToDecimal(a), db = ToDecimal(b);
      const FractionLimit low{true, da.fraction, a_open}, high{true, db.fraction, b_open};
      std::vector<std::string> parts;
      bool ok = false;
      if (da.whole == db.whole) {
        std::string fraction = FractionPart(low, high, fraction_digits, &ok);
        if (ok) parts.push_back(GbnfLiteral(std::to_string(da.whole)) + fraction);
      } else {
        std::string fraction = FractionPart(low, FractionLimit{}, fraction_digits, &ok);
        if (ok) parts.push_back(GbnfLiteral(std::to_string(da.whole)) + fraction);
        if (da.whole + 1 <= db.whole - 1) {
          parts.push_back(IntegerRangeGbnf(da.whole + 1, db.whole - 1) +
                          FractionPart(FractionLimit{}, FractionLimit{}, fraction_digits, &ok));
        }
        fraction = FractionPart(FractionLimit{}, high, fraction_digits, &ok);
        if (ok) parts.push_back(GbnfLiteral(std::to_string(db.whole)) + fraction);
      }
      if (parts.empty()) return std::string();
      return "(" + Join(parts, " | ") + ")";
    };
    std::vector<std::string> parts;
    if (lo.value < 0) {  // x < 0 (and "-0" where zero is allowed): magnitudes from max(0, -hi) to -lo
      std::string m = magnitudes(std::max(0.0, -hi.value), hi.value <= 0 && hi.open, -lo.value, lo.open);
      if (!m.empty()) parts.push_back("\"-\" " + m);
    }
    if (hi.value > 0 || (hi.value == 0 && !hi.open)) {
      std::string m = magnitudes(std::max(0.0, lo.value), lo.value >= 0 && lo.open, hi.value, hi.open);
      if (!m.empty()) parts.push_back(m);
    }
    return Join(parts, " | ");
  }

  // ---- helpers ----

  Status OnlyAnnotationsBeside(const Json& schema, const std::string& keyword, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
      if (key != keyword && !kAnnotations.count(key) && key != "type") {
        return Error(Pointer(path, key),
                     fmt::format("keyword '{}' beside {} is not supported", key, keyword));
      }
    }
    return Status::Ok();
  }

  Expected<int64_t> Count(const Json& schema, const char* key, int64_t fallback, const std::string& path) {
    const Json* v = Find(schema, key);
    if (!v) return fallback;
    std::optional<int64_t> n = JsonInteger(*v);
    if (!n || *n < 0) return Error(Pointer(path, key), "must be a non-negative integer");
    return *n;
  }

  static std::string ConstLiteral(const Json& value) { return GbnfLiteral(value.dump()); }

  static const Json* Find(const Json& schema, const char* key) {
    auto it = schema.find(key);
    return it == schema.end() ? nullptr : &*it;
  }

  std::string NewRule(const std::string& path, const std::string& body) {
    std::string name = UniqueName(GbnfRuleName(path.size() > 1 ? path.substr(2) : "root-value"));
    rules_[name] = body;
    return name;
  }

  std::string UniqueName(const std::string& base) {
    std::string name = base.empty() ? "s" : base;
    if (name.size() > 60) name = name.substr(name.size() - 60);
    name = GbnfRuleName(name);
    // Keep clear of the fixed rules' names.
    if (name == "root" || name.rfind("json-", 0) == 0) name = "s-" + name;
    std::string unique = name;
    int& suffix = next_suffix_[name];
    while (used_names_.count(unique)) unique = fmt::format("{}-{}", name, ++suffix);
    used_names_.insert(unique);
    return unique;
  }

  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgument("schema {}: {}", path, what);
  }

  const Json& root_;
  std::map<std::string, std::string> rules_;
  std::set<std::string> used_names_;
  std::unordered_map<std::string, int> next_suffix_;  // per base name, so naming stays linear
  std::unordered_map<std::string, std::string> ref_rules_;
  std::vector<std::unique_ptr<Json>> merged_;  // allOf results, alive while referenced
};

}  // namespace

Expected<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema) {
  return SchemaConverter(schema).Convert();
}

Expected<std::string> JsonSchemaToGbnf(std::string_view schema_text) {
  if (schema_text.size() > kMaxSchemaBytes) {
    return OutOfRange("schema of {} bytes exceeds the limit of {}", schema_text.size(), kMaxSchemaBytes);
  }
  // The checked parse bounds nesting before the order-keeping one runs.
  KILN_RETURN_IF_ERROR(ParseJsonText(schema_text, "schema").status());
  Json schema = Json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return InvalidArgument("schema: not valid JSON");
  return JsonSchemaToGbnf(schema);
}

Expected<Grammar> CompileJsonSchema(std::string_view schema_text) {
  KILN_ASSIGN_OR_RETURN(std::string gbnf, JsonSchemaToGbnf(schema_text));
  Expected<Grammar> grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) return grammar.status().WithContext("schema");
  return grammar;
}

}  // namespace kiln
