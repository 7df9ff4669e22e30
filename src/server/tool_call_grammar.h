// The grammar that holds a model's tool calls to the request's tools: the
// format's opening text, {"name": one of the tools, "arguments": JSON that
// tool's `parameters` schema accepts}, the closing text, once or (with
// parallel calls) repeatedly.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/sampling_params.h"
#include "server/json_fields.h"
#include "server/tool_request.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tool_call_format.h"

namespace kiln::server {

struct ToolCallGrammar {
  std::string gbnf;                   // for SamplingParams::grammar
  std::vector<std::string> triggers;  // for SamplingParams::grammar_triggers; empty: from the start
};

// The texts that open a tool call in `format`'s output, as the lazy
// grammar's triggers and the output parser's markers.
std::vector<std::string> ToolCallTriggers(ToolCallFormat format);

// Builds the constraint for `request` (which must be active()):
// tool_choice auto gives the calls grammar with the format's triggers, so
// the reply is free until it opens a call; required and a named function
// give it from the first byte, led by an optional think block (or the rest
// of one, for kInside) when the model thinks. A named choice admits only
// that function; parallel_tool_calls false admits one call. A parameters
// schema kiln cannot enforce is a 400 naming tools[i].function.parameters.
//
// `answer_gbnf`, when not empty, is the grammar the answer itself must
// follow (response_format or grammar, as GBNF): under auto the reply is
// then either calls or such an answer, from the first byte; under required
// or a named function it is calls, so the answer grammar is not used.
ApiStatus BuildToolCallGrammar(const ToolRequest& request, ToolCallFormat format, ThinkingMode thinking,
                               const std::string& answer_gbnf, ToolCallGrammar* out);

// Puts the constraint of an active `request` into `params`: the grammar
// and triggers of BuildToolCallGrammar, with the answer constraint `params`
// already holds (json_schema or json_object from response_format, or a
// grammar) as its answer_gbnf, so one grammar carries both. A bad answer
// constraint is a 400 naming response_format or grammar.
ApiStatus ApplyToolCallConstraint(const ToolRequest& request, ToolCallFormat format, ThinkingMode thinking,
                                  SamplingParams* params);

// `gbnf` with every rule name prefixed by `prefix`, so that the grammars of
// several schemas can live in one grammar.
std::string PrefixGbnfRules(const std::string& gbnf, const std::string& prefix);

}  // namespace kiln::server
