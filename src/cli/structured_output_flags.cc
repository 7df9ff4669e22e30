// Reading and checking the files of --json-schema and --grammar.
#include "cli/structured_output_flags.h"

#include "core/mapped_file.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_grammar.h"

namespace kiln::cli {

void AddStructuredOutputFlags(CLI::App* cmd, StructuredOutputFlags* flags) {
  const std::string group = "Structured output (enforced token by token)";
  auto* schema = cmd->add_option("--json-schema", flags->json_schema_file,
                                 "Write only JSON that the JSON Schema in FILE accepts")
                     ->group(group);
  auto* grammar = cmd->add_option("--grammar", flags->grammar_file,
                                  "Write only text the GBNF grammar in FILE accepts "
                                  "(llama.cpp's format, start rule root)")
                      ->group(group);
  auto* object = cmd->add_flag("--json-object", flags->json_object, "Write only a JSON object")->group(group);
  schema->excludes(grammar)->excludes(object);
  grammar->excludes(object);
}

Status ApplyStructuredOutputFlags(const StructuredOutputFlags& flags, SamplingParams* params) {
  if (flags.json_object) params->json_object = true;
  if (!flags.json_schema_file.empty()) {
    const std::string flag = "--json-schema " + flags.json_schema_file;
    Expected<std::string> text = ReadFileToString(flags.json_schema_file);  // its errors name the file
    if (!text.ok()) return text.status().WithContext("--json-schema");
    if (text->size() > kMaxSchemaBytes) {
      return OutOfRange("{}: the schema has {} bytes, over the limit of {}", flag, text->size(),
                        kMaxSchemaBytes);
    }
    Expected<Grammar> compiled = CompileJsonSchema(*text);
    if (!compiled.ok()) return compiled.status().WithContext(flag);
    params->json_schema = std::move(text).value();
  }
  if (!flags.grammar_file.empty()) {
    const std::string flag = "--grammar " + flags.grammar_file;
    Expected<std::string> text = ReadFileToString(flags.grammar_file);
    if (!text.ok()) return text.status().WithContext("--grammar");
    if (text->size() > kMaxGrammarTextBytes) {
      return OutOfRange("{}: the grammar has {} bytes, over the limit of {}", flag, text->size(),
                        kMaxGrammarTextBytes);
    }
    Expected<Grammar> parsed = ParseGbnf(*text);
    if (!parsed.ok()) return parsed.status().WithContext(flag);
    params->grammar = std::move(text).value();
  }
  return Status::Ok();
}

}  // namespace kiln::cli
