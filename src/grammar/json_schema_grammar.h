// JSON Schema (2020-12, with draft-07's spellings) to GBNF, so that a model
// constrained by the grammar writes only JSON the schema accepts.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kiln {

// Limits on an untrusted schema.
inline constexpr size_t kMaxSchemaBytes = 256 * 1024;  // schema JSON text
inline constexpr int kMaxSchemaDepth = 64;             // nested subschemas, $refs included
inline constexpr size_t kMaxSchemaRules = 20000;       // rules generated

// Translates a schema into a GBNF grammar (root rule `root`). Supported:
// `type` (object, array, string, number, integer, boolean, null, or a list
// of them); `properties`, `required`, `additionalProperties` (absent means
// allowed, as the specification says; extra keys are then written without
// escapes and may not repeat a declared name); `items`, `prefixItems` (and
// draft-07's `items` list with `additionalItems`), `minItems`, `maxItems`;
// `enum`, `const` (beside which only `type` may constrain); `anyOf`; `oneOf`
// when its branches provably exclude each other (schema_disjointness.h), so
// that the value written matches exactly one: overlapping branches are an
// error naming them, never enforced as anyOf; a `type` beside anyOf/oneOf
// narrows each branch, and false branches are left out; `allOf` of object
// schemas (merged: a property in several members must satisfy each, a
// member's additionalProperties false allows only its own names; keywords
// beside allOf count as one more member, true members as none); `$ref` to
// "#" or a JSON pointer into the document (%-escapes decoded), `$defs` and
// `definitions`, recursion included; false as a property's or a
// prefixItems entry's schema (that property or place never written);
// strings' `minLength`, `maxLength`, `pattern` (see regex_to_gbnf.h) and
// `format` (date, with each month's days and February 29th in leap years
// only; time and date-time with a leap second only at 23:59:60 UTC; uuid;
// email); integer `minimum`, `maximum` and their exclusive forms (any
// bounds: see integer_range.h); number `minimum` and `maximum`, and their
// exclusive forms when whole numbers (the number is then written without an
// exponent, with no more digits than a double tells apart from an
// exclusive bound). Without `type`, the keywords used imply it (`properties` an
// object, `items` an array, ...).
//
// Properties are written in the schema's order, required ones first.
// Numbers and whitespace are bounded as in json_grammar.h. Annotations
// (title, description, default, examples, $schema, $id, $comment, ...) are
// ignored. Any other keyword that constrains values (not, if/then/else,
// patternProperties, minProperties, uniqueItems, multipleOf, ...) is an
// error naming it and where it is ("#/properties/a"), never silently
// dropped; so are $ref cycles that could never end.
Expected<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);

// The same from the schema's JSON text, checked against kMaxSchemaBytes.
Expected<std::string> JsonSchemaToGbnf(std::string_view schema_text);

// JsonSchemaToGbnf parsed into a Grammar.
Expected<Grammar> CompileJsonSchema(std::string_view schema_text);

}  // namespace kiln
