// Sampling parameter validation.
#include "engine/sampling_params.h"

#include <cmath>

namespace kiln {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) {
    return InvalidArgument("temperature must be a finite number >= 0, got {}", temperature);
  }
  if (top_k < 0) return InvalidArgument("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0 && top_p <= 1)) return InvalidArgument("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0 && min_p <= 1)) return InvalidArgument("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) {
    return InvalidArgument("repetition_penalty must be > 0, got {}", repetition_penalty);
  }
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) {
    return InvalidArgument("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  }
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) {
    return InvalidArgument("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  }
  if (max_tokens < 1) return InvalidArgument("max_tokens must be >= 1, got {}", max_tokens);
  if (min_tokens < 0) return InvalidArgument("min_tokens must be >= 0, got {}", min_tokens);
  if (top_logprobs < 0 || top_logprobs > 20) {
    return InvalidArgument("top_logprobs must be in [0, 20], got {}", top_logprobs);
  }
  for (const std::string& s : stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  const int constraints = (grammar.empty() ? 0 : 1) + (json_schema.empty() ? 0 : 1) + (json_object ? 1 : 0);
  if (constraints > 1) return InvalidArgument("grammar, json_schema and json_object are exclusive: give one");
  if (!grammar_triggers.empty() && constraints == 0) {
    return InvalidArgument("grammar_triggers need a grammar or a json_schema");
  }
  for (const std::string& t : grammar_triggers) {
    if (t.empty()) return InvalidArgument("grammar_triggers must not be empty strings");
  }
  return Status::Ok();
}

}  // namespace kiln
