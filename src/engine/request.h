// What a caller hands the engine (a prompt, sampling parameters, a callback)
// and what it gets back (tokens, text, per-request statistics).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace kiln {

using RequestId = int64_t;

enum class FinishReason {
  kNone,    // still running
  kStop,    // an end-of-generation id, a stop id or a stop string
  kLength,  // max_tokens reached
  kAbort,   // aborted by the caller
  kError,   // the engine failed while running it
};

// "stop", "length", "abort", "error" ("" for kNone), as OpenAI's API spells them.
const char* FinishReasonName(FinishReason reason);

// Times are seconds on the steady clock (see EngineClock()); a time not
// reached yet is negative.
struct RequestStats {
  double arrival_time = -1;          // AddRequest
  double first_scheduled_time = -1;  // first forward pass that included it
  double first_token_time = -1;      // first new token sampled
  double last_token_time = -1;
  double finish_time = -1;

  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens found in the prefix cache when first scheduled
  int32_t completion_tokens = 0;
  int32_t num_preemptions = 0;
  FinishReason finish_reason = FinishReason::kNone;

  // Time spent waiting before the first pass.
  double queue_time() const;
  // Time to first token, from arrival.
  double ttft() const;
  // Mean time per output token after the first (0 with fewer than two).
  double tpot() const;
};

// What the engine tells a request's callback each time it samples a token,
// and once more if the request ends without one (an abort).
struct TokenEvent {
  RequestId request_id = -1;
  int32_t token = -1;  // -1 when the event only reports the end
  // Text this token completes and that is certain not to belong to a stop
  // string (often empty; the final event carries what was held back).
  std::string text;
  float logprob = 0;  // when the request asked for logprobs
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  const RequestStats* stats = nullptr;  // valid during the call
};

// Called on the engine's thread; must not call back into the engine's Step().
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerationRequest {
  std::string prompt;               // tokenized when prompt_ids is empty
  std::vector<int32_t> prompt_ids;  // used as given when not empty
  bool add_special_tokens = true;   // for a text prompt: BOS where the tokenizer adds it
  SamplingParams params;
  TokenCallback on_token;  // optional
  // Non-zero on a prefill instance: the prompt's full KV blocks go to the
  // engine's KV connector under this id as passes complete them, and the
  // transfer ends when the request does (kv_connector.h).
  uint64_t kv_transfer_id = 0;
};

struct GenerationResult {
  RequestId id = -1;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;  // including a final end-of-generation or stop id
  std::string text;                 // the output text without stop strings or special tokens
  std::vector<float> logprobs;      // per output id, when requested
  RequestStats stats;
};

}  // namespace kiln
