// Structured output as clients ask for it: OpenAI's response_format
// ({"type": "text"}, {"type": "json_object"}, {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}}) and
// llama.cpp's request fields grammar (GBNF text) and json_schema (a schema),
// read into SamplingParams' grammar, json_schema and json_object.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/sampling_params.h"
#include "server/json_fields.h"

namespace kiln::server {

// The body fields that can constrain the output, as named in errors.
inline constexpr const char* kResponseFormatField = "response_format";
inline constexpr const char* kGrammarField = "grammar";
inline constexpr const char* kJsonSchemaField = "json_schema";

// Reads response_format, grammar and json_schema from the body into
// `params`; at most one of them may constrain the output. The schema is
// enforced whether or not `strict` is true. `*field` becomes the body field
// the constraint came from ("" when none), for errors found later. A
// malformed field, a json_schema format without a schema, or a schema or
// grammar over its size limit (kMaxSchemaBytes, kMaxGrammarTextBytes) is a
// 400 naming the field.
bool ReadStructuredOutput(JsonFields& f, SamplingParams* params, std::string* field);

// The body is parsed without keeping the order of object keys, but a
// schema's property order is the order the model writes them in: re-reads
// params->json_schema from the body's text with its keys in order.
// REQUIRES: ReadStructuredOutput read `body` and gave `field`.
void KeepSchemaKeyOrder(std::string_view body, const std::string& field, SamplingParams* params);

// The body field at fault when the engine refuses a request's constraint:
// its messages about them start with "json_schema:" or "grammar:". `field`
// is what ReadStructuredOutput gave. "" when the error is about something
// else.
std::string ConstraintErrorField(const Status& status, const std::string& field);

}  // namespace kiln::server
