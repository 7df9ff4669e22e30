// Many prompts in one file for `kiln generate`: plain text, one prompt per
// line, or JSON Lines with a prompt and its own sampling parameters per line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/sampling_params.h"

namespace kiln {

struct PromptSpec {
  // Exactly one of these three is set.
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  nlohmann::ordered_json messages;  // a chat: [{"role", "content"}, ...], or null
  SamplingParams params;
  int64_t line = 0;  // 1-based line in the file, for messages
};

// Parses a prompt file. JSON Lines when `name` ends in ".jsonl" or the
// first non-blank line starts with '{'; otherwise every non-blank line is
// one prompt, with `defaults`. A JSON line is an object with "prompt" (a
// string), "prompt_ids" (token ids) or "messages" (a chat), and optionally
// any of max_tokens, min_tokens, temperature, top_k, top_p, min_p,
// repetition_penalty, presence_penalty, frequency_penalty, seed, stop (a
// string or a list), stop_token_ids, ignore_eos, logprobs, top_logprobs,
// which override `defaults`. Errors name the file, line and field.
Expected<std::vector<PromptSpec>> ParsePromptFile(std::string_view text, const std::string& name,
                                                  const SamplingParams& defaults);

// Reads and parses a prompt file.
Expected<std::vector<PromptSpec>> ReadPromptFile(const std::string& path, const SamplingParams& defaults);

}  // namespace kiln
