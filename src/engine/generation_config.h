// A model's generation_config.json: its end-of-sequence ids and the
// sampling it was published to be used with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/sampling_params.h"

namespace kiln {

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int32_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int32_t> max_new_tokens;

  // Sampling parameters as the model's authors intended: greedy when
  // do_sample is false, otherwise their temperature, top-k, top-p, min-p
  // and repetition penalty over SamplingParams' defaults.
  SamplingParams DefaultSamplingParams() const;
};

// Reads `path`; a missing file is an empty config. Errors name the file
// and the field.
Expected<GenerationConfig> ReadGenerationConfig(const std::string& path);

// The same, from JSON text (`name` is used in messages).
Expected<GenerationConfig> ParseGenerationConfig(const std::string& json_text, const std::string& name);

}  // namespace kiln
