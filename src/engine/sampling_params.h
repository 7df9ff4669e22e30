// How to pick each next token of one request, and when to stop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

struct SamplingParams {
  // 0 means greedy (argmax, lowest id on ties).
  double temperature = 1.0;
  int32_t top_k = 0;     // 0: off
  double top_p = 1.0;    // 1: off
  double min_p = 0.0;    // 0: off
  // Hugging Face style: logits of tokens seen in the prompt or output are
  // divided (if positive) or multiplied (if negative) by this.
  double repetition_penalty = 1.0;
  // OpenAI style, over the generated tokens: subtract presence once per
  // distinct token and frequency times its count.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;  // unset: a fresh seed per request

  int32_t max_tokens = 16;              // new tokens at most
  int32_t min_tokens = 0;               // stop conditions are ignored before this many
  std::vector<std::string> stop;        // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;  // extra stop ids
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  // Log-probabilities: of the chosen token when logprobs is true, plus the
  // top_logprobs most likely alternatives.
  bool logprobs = false;
  int32_t top_logprobs = 0;

  // Structured output, enforced token by token (at most one of the three):
  // a GBNF grammar (llama.cpp's format, start rule `root`), a JSON Schema's
  // text, or any JSON object. The engine compiles it against the
  // tokenizer's vocabulary (cached by text) and masks every token the
  // grammar cannot take next. When no token can follow, the request ends
  // with reason stop.
  std::string grammar;
  std::string json_schema;
  bool json_object = false;
  // With a constraint: when not empty, the output is free until it contains
  // one of these texts; from that trigger's first byte on, the grammar
  // must match the rest of the output (tool calls under tool_choice auto).
  std::vector<std::string> grammar_triggers;

  bool constrained() const { return !grammar.empty() || !json_schema.empty() || json_object; }

  // Ranges: temperature >= 0, top_p in (0, 1], min_p in [0, 1], top_k >= 0,
  // repetition_penalty > 0, penalties in [-2, 2], max_tokens >= 1,
  // top_logprobs in [0, 20], one constraint at most, triggers only with a
  // constraint and never empty. The message names the field.
  Status Validate() const;
};

}  // namespace kiln
