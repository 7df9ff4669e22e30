// Reading response_format, grammar and json_schema into SamplingParams.
#include "server/response_format.h"

#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/json_schema_grammar.h"

namespace kiln::server {
namespace {

using OrderedJson = nlohmann::ordered_json;

// A schema given as a value: an object or a boolean, within kMaxSchemaBytes.
bool ReadSchema(JsonFields& f, const std::string& path, const nlohmann::json& schema, std::string* out) {
  if (!schema.is_object() && !schema.is_boolean()) {
    return f.Fail(path, fmt::format("a schema must be an object or a boolean, got {}", JsonTypeName(schema)));
  }
  std::string text = schema.dump();
  if (text.size() > kMaxSchemaBytes) {
    return f.Fail(path,
                  fmt::format("the schema has {} bytes, over the limit of {}", text.size(), kMaxSchemaBytes));
  }
  *out = std::move(text);
  return true;
}

// An optional member of `object` that must be a string or a boolean.
bool OptionalOfType(JsonFields& f, const nlohmann::json& object, const std::string& path, const char* key,
                    bool (nlohmann::json::*is_type)() const noexcept, const char* expected) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null() || ((*it).*is_type)()) return true;
  return f.Fail(path + "." + key, fmt::format("expected {}, got {}", expected, JsonTypeName(*it)));
}

bool ReadResponseFormat(JsonFields& f, const nlohmann::json& format, SamplingParams* params) {
  const std::string field = kResponseFormatField;
  if (!format.is_object())
    return f.Fail(field, fmt::format("expected an object, got {}", JsonTypeName(format)));
  auto type = format.find("type");
  if (type == format.end() || type->is_null()) return f.Fail(field + ".type", "is required");
  if (!type->is_string())
    return f.Fail(field + ".type", fmt::format("expected a string, got {}", JsonTypeName(*type)));
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "text") return true;
  if (name == "json_object") {
    // llama.cpp's form {"type": "json_object", "schema": {...}} constrains by the schema.
    auto schema = format.find("schema");
    if (schema != format.end() && !schema->is_null()) {
      return ReadSchema(f, field + ".schema", *schema, &params->json_schema);
    }
    params->json_object = true;
    return true;
  }
  if (name != "json_schema") {
    return f.Fail(field + ".type",
                  fmt::format("must be text, json_object or json_schema, got {}", type->dump()));
  }
  const std::string spec_path = field + ".json_schema";
  auto spec = format.find("json_schema");
  if (spec == format.end() || spec->is_null()) return f.Fail(spec_path, "is required with type json_schema");
  if (!spec->is_object())
    return f.Fail(spec_path, fmt::format("expected an object, got {}", JsonTypeName(*spec)));
  if (!OptionalOfType(f, *spec, spec_path, "name", &nlohmann::json::is_string, "a string")) return false;
  if (!OptionalOfType(f, *spec, spec_path, "description", &nlohmann::json::is_string, "a string"))
    return false;
  // strict: false still gets the schema enforced; a schema is never a hint.
  if (!OptionalOfType(f, *spec, spec_path, "strict", &nlohmann::json::is_boolean, "a boolean")) return false;
  auto schema = spec->find("schema");
  if (schema == spec->end() || schema->is_null()) return f.Fail(spec_path + ".schema", "is required");
  return ReadSchema(f, spec_path + ".schema", *schema, &params->json_schema);
}

// Where the schema of a request read from `field` is in the body.
OrderedJson::json_pointer SchemaPointer(const OrderedJson& body, const std::string& field) {
  if (field == kJsonSchemaField) return OrderedJson::json_pointer("/json_schema");
  if (body.contains("response_format") && body["response_format"].contains("json_schema")) {
    return OrderedJson::json_pointer("/response_format/json_schema/schema");
  }
  return OrderedJson::json_pointer("/response_format/schema");
}

}  // namespace

bool ReadStructuredOutput(JsonFields& f, SamplingParams* params, std::string* field) {
  field->clear();
  const nlohmann::json& format = f.Get(kResponseFormatField);
  if (!format.is_null()) {
    if (!ReadResponseFormat(f, format, params)) return false;
    if (params->constrained()) *field = kResponseFormatField;
  }

  std::optional<std::string> grammar;
  if (!f.String(kGrammarField, &grammar)) return false;
  if (grammar && !grammar->empty()) {  // llama.cpp clients send "" for none
    if (!field->empty()) return f.Fail(kGrammarField, fmt::format("cannot be combined with {}", *field));
    if (grammar->size() > kMaxGrammarTextBytes) {
      return f.Fail(kGrammarField, fmt::format("the grammar has {} bytes, over the limit of {}",
                                               grammar->size(), kMaxGrammarTextBytes));
    }
    params->grammar = std::move(*grammar);
    *field = kGrammarField;
  }

  const nlohmann::json& schema = f.Get(kJsonSchemaField);
  // llama.cpp clients send {} for none.
  if (!schema.is_null() && !(schema.is_object() && schema.empty())) {
    if (!field->empty()) return f.Fail(kJsonSchemaField, fmt::format("cannot be combined with {}", *field));
    if (!ReadSchema(f, kJsonSchemaField, schema, &params->json_schema)) return false;
    *field = kJsonSchemaField;
  }
  return true;
}

void KeepSchemaKeyOrder(std::string_view body, const std::string& field, SamplingParams* params) {
  if (params->json_schema.empty()) return;
  // Only the fields a schema can be in are kept while parsing.
  auto keep = [](int depth, OrderedJson::parse_event_t event, OrderedJson& parsed) {
    if (depth == 1 && event == OrderedJson::parse_event_t::key) {
      return parsed == kResponseFormatField || parsed == kJsonSchemaField;
    }
    return true;
  };
  OrderedJson ordered = OrderedJson::parse(body, keep, /*allow_exceptions=*/false);
  OrderedJson::json_pointer pointer = SchemaPointer(ordered, field);
  if (ordered.is_discarded() || !ordered.contains(pointer)) {
    return;  // the body parsed once already, so this does not happen; the schema is then kept as read
  }
  params->json_schema = ordered.at(pointer).dump();
}

std::string ConstraintErrorField(const Status& status, const std::string& field) {
  const std::string& message = status.message();
  auto starts_with = [&](std::string_view prefix) { return message.compare(0, prefix.size(), prefix) == 0; };
  const bool schema = starts_with("json_schema:");
  const bool grammar = starts_with("grammar:");
  if (!schema && !grammar) return "";
  if (!field.empty()) return field;
  return schema ? kResponseFormatField : kGrammarField;
}

}  // namespace kiln::server
