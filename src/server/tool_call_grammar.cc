// Tool-call grammars from the tools' parameter schemas.
#include "server/tool_call_grammar.h"

#include <fmt/format.h>

#include "grammar/gbnf_parser.h"
#include "grammar/gbnf_text.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema_grammar.h"

namespace kiln::server {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The pieces of one format's calls.
struct CallSyntax {
  std::string list_open;   // before the first call
  std::string open;        // before each call's JSON
  std::string arguments_key;
  std::string close;       // after each call's JSON
  std::string separator;   // between calls
  std::string list_close;  // after the last call
};

CallSyntax SyntaxOf(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return {"", "<tool_call>\n", "arguments", "\n</tool_call>", "\n", ""};
    case ToolCallFormat::kLlama3Json:
      return {"", "", "parameters", "", "; ", ""};
    case ToolCallFormat::kMistral:
      return {"[TOOL_CALLS] [", "", "arguments", "", ", ", "]"};
  }
  return {};
}

}  // namespace

std::vector<std::string> ToolCallTriggers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return {"<tool_call>"};
    case ToolCallFormat::kLlama3Json:
      return {"{\"name\""};
    case ToolCallFormat::kMistral:
      return {"[TOOL_CALLS]"};
  }
  return {};
}

std::string PrefixGbnfRules(const std::string& gbnf, const std::string& prefix) {
  std::string out;
  out.reserve(gbnf.size() * 2);
  size_t i = 0;
  const size_t n = gbnf.size();
  while (i < n) {
    char c = gbnf[i];
    if (c == '"' || c == '[') {
      // A literal or a character class, copied through its closing quote or bracket.
      const char end = c == '"' ? '"' : ']';
      out += c;
      ++i;
      while (i < n && gbnf[i] != end) {
        if (gbnf[i] == '\\' && i + 1 < n) out += gbnf[i++];
        out += gbnf[i++];
      }
      if (i < n) out += gbnf[i++];
    } else if (c == '{') {  // a repetition count
      while (i < n && gbnf[i] != '}') out += gbnf[i++];
      if (i < n) out += gbnf[i++];
    } else if (c == '#') {  // a comment, to the end of the line
      while (i < n && gbnf[i] != '\n') out += gbnf[i++];
    } else if (IsNameChar(c)) {
      size_t start = i;
      while (i < n && IsNameChar(gbnf[i])) ++i;
      out += prefix;
      out.append(gbnf, start, i - start);
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

ApiStatus BuildToolCallGrammar(const ToolRequest& request, ToolCallFormat format, ThinkingMode thinking,
                               const std::string& answer_gbnf, ToolCallGrammar* out) {
  const CallSyntax syntax = SyntaxOf(format);
  std::string rules;
  std::vector<std::string> alternatives;
  for (size_t i = 0; i < request.tools.size(); ++i) {
    const ToolFunction& tool = request.tools[i];
    if (request.choice == ToolChoiceMode::kNamed && tool.name != request.choice_name) continue;
    // Arguments are an object: a schema that says nothing is read as "any object".
    nlohmann::ordered_json schema = tool.parameters;
    if (schema.empty()) schema = {{"type", "object"}};
    Expected<std::string> gbnf = JsonSchemaToGbnf(schema);
    const std::string field = fmt::format("tools[{}].function.parameters", i);
    if (!gbnf.ok()) return BadRequest(field, fmt::format("{}: {}", field, gbnf.status().message()));
    // Checked on its own, so that a schema whose grammar cannot work (a $ref
    // cycle that never ends) is this tool's error, not the whole grammar's.
    Expected<Grammar> check = ParseGbnf(*gbnf);
    if (!check.ok()) return BadRequest(field, fmt::format("{}: {}", field, check.status().message()));
    const std::string prefix = fmt::format("tool{}-", i);
    rules += PrefixGbnfRules(*gbnf, prefix);
    if (!rules.empty() && rules.back() != '\n') rules += '\n';
    const std::string head =
        syntax.open + "{\"name\": " + nlohmann::ordered_json(tool.name).dump() + ", \"" + syntax.arguments_key + "\": ";
    rules += fmt::format("{}call ::= {} {}root {}\n", prefix, GbnfLiteral(head), prefix,
                         GbnfLiteral("}" + syntax.close));
    alternatives.push_back(prefix + "call");
  }
  std::string call = "tool-call ::= ";
  for (size_t i = 0; i < alternatives.size(); ++i) call += (i ? " | " : "") + alternatives[i];
  std::string calls = "tool-calls ::= ";
  if (!syntax.list_open.empty()) calls += GbnfLiteral(syntax.list_open) + " ";
  calls += "tool-call";
  if (request.parallel) calls += " (" + GbnfLiteral(syntax.separator) + " tool-call)*";
  if (!syntax.list_close.empty()) calls += " " + GbnfLiteral(syntax.list_close);

  std::string root;
  const bool with_answer = request.choice == ToolChoiceMode::kAuto && !answer_gbnf.empty();
  const bool lazy = request.choice == ToolChoiceMode::kAuto && !with_answer;
  if (lazy) {
    root = "root ::= tool-calls\n";
    out->triggers = ToolCallTriggers(format);
  } else {
    out->triggers.clear();
    const std::string reply = with_answer ? "(tool-calls | answer-root)" : "tool-calls";
    switch (thinking) {
      case ThinkingMode::kNone:
        root = "root ::= " + reply + "\n";
        break;
      case ThinkingMode::kOptional:
        root = "root ::= (\"<think>\" think-text \"</think>\" [ \\n]{0,4})? " + reply + "\n";
        break;
      case ThinkingMode::kInside:
        root = "root ::= think-text \"</think>\" [ \\n]{0,4} " + reply + "\n";
        break;
    }
    // Thinking is free text that cannot close the block early.
    if (thinking != ThinkingMode::kNone) root += "think-text ::= ([^<] | \"<\" [^/])*\n";
    if (with_answer) {
      rules += PrefixGbnfRules(answer_gbnf, "answer-");
      if (rules.back() != '\n') rules += '\n';
    }
  }
  out->gbnf = root + calls + "\n" + call + "\n" + rules;
  // The whole must fit the grammar limits too (many large tools may not).
  Expected<Grammar> whole = ParseGbnf(out->gbnf);
  if (!whole.ok()) {
    return BadRequest("tools", fmt::format("tools: the grammar of the tool calls: {}", whole.status().message()));
  }
  return std::nullopt;
}

ApiStatus ApplyToolCallConstraint(const ToolRequest& request, ToolCallFormat format, ThinkingMode thinking,
                                  SamplingParams* params) {
  std::string answer;
  const char* field = !params->json_schema.empty() || params->json_object ? "response_format" : "grammar";
  if (!params->json_schema.empty()) {
    Expected<std::string> gbnf = JsonSchemaToGbnf(std::string_view(params->json_schema));
    if (!gbnf.ok()) return BadRequest(field, fmt::format("{}: {}", field, gbnf.status().message()));
    answer = std::move(gbnf).value();
  } else if (params->json_object) {
    answer = JsonObjectGbnf();
  } else {
    answer = params->grammar;
  }
  if (!answer.empty()) {
    Expected<Grammar> check = ParseGbnf(answer);
    if (!check.ok()) return BadRequest(field, fmt::format("{}: {}", field, check.status().message()));
  }
  ToolCallGrammar grammar;
  if (ApiStatus e = BuildToolCallGrammar(request, format, thinking, answer, &grammar)) return e;
  params->json_schema.clear();
  params->json_object = false;
  params->grammar = std::move(grammar.gbnf);
  params->grammar_triggers = std::move(grammar.triggers);
  return std::nullopt;
}

}  // namespace kiln::server
