// Whether two JSON Schemas provably accept no value in common, so that a
// value written to match one of oneOf's branches matches exactly one.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln {

// Resolves a $ref's target; null when it cannot be resolved.
using SchemaRefResolver = std::function<const nlohmann::ordered_json*(const std::string& ref)>;

// True only when no JSON value is valid under both `a` and `b` (JSON Schema
// semantics, not the narrower grammar kiln writes). Sound, not complete:
// false means "not proven". The proofs: the types they accept differ
// (integer and number overlap); const/enum values the other schema
// provably rejects; a property one requires and the other forbids (false,
// or additionalProperties false) or that both require with disjoint
// schemas; number bounds, string lengths or item counts that do not
// overlap; and the same through anyOf, oneOf, allOf and $ref.
bool SchemasProvablyDisjoint(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                             const SchemaRefResolver& resolve);

// True only when `value` is invalid under `schema` (sound, not complete),
// by the checks above.
bool ValueProvablyInvalid(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                          const SchemaRefResolver& resolve);

// True only when every value `schema` accepts has one of the types `type`
// (a type keyword's value: a name or a list of names).
bool SchemaWithinTypes(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& type,
                       const SchemaRefResolver& resolve);

// True only when `schema` accepts no value at all.
bool SchemaProvablyEmpty(const nlohmann::ordered_json& schema, const SchemaRefResolver& resolve);

}  // namespace kiln
