// Sequence construction.
#include "engine/sequence.h"

#include <utility>

namespace kiln {

Sequence::Sequence(RequestId request_id, std::vector<int32_t> prompt, SamplingParams sampling)
    : id(request_id),
      tokens(std::move(prompt)),
      num_prompt_tokens(static_cast<int32_t>(tokens.size())),
      params(std::move(sampling)),
      sampler{Rng(0), {}, {}} {
  stats.prompt_tokens = num_prompt_tokens;
}

}  // namespace kiln
