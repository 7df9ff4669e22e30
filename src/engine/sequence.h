// One request as the scheduler, block manager and model runner see it: its
// tokens, how many of them are in the KV cache, and where their blocks are.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/draft_length.h"
#include "engine/output_constraint.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace kiln {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// Plain state shared by the engine's parts; each field says who writes it.
struct Sequence {
  Sequence(RequestId request_id, std::vector<int32_t> prompt, SamplingParams sampling);

  RequestId id;
  // The prompt followed by the tokens generated so far. Append-only: the
  // prefix cache's block hashes depend on it.
  std::vector<int32_t> tokens;
  // Speculative decoding: tokens a proposer guessed to follow `tokens`, not
  // yet verified by the model. The engine sets them before a step, the
  // scheduler trims them to what the step can take, and the engine empties
  // them once the pass has verified them. Never part of `tokens`, so never
  // hashed into the prefix cache.
  std::vector<int32_t> draft;
  // The proposer's distribution over the vocabulary at each draft position
  // (rejection sampling's q), or empty: each draft token was proposed with
  // certainty. Set and trimmed with `draft`.
  std::vector<std::vector<float>> draft_probs;
  // How long the next drafts should be, from how often drafts were
  // accepted (the engine's).
  DraftLength draft_length;
  int32_t num_prompt_tokens;
  SamplingParams params;
  SamplerState sampler;  // the engine sets it up; the model runner draws from it
  // Structured output (null without one): the engine creates it and
  // advances it by each sampled token; the model runner reads its mask.
  std::unique_ptr<OutputConstraint> constraint;
  SequenceStatus status = SequenceStatus::kWaiting;
  RequestStats stats;

  // Tokens whose keys and values are in the cache (the scheduler advances
  // it after each pass; preemption resets it to 0).
  int32_t num_computed_tokens = 0;
  // KV blocks holding tokens [i * block_size, (i + 1) * block_size).
  // Owned by the block manager.
  std::vector<int32_t> block_table;
  // Chained hashes of the first full blocks of `tokens` (computed lazily by
  // the block manager; they stay valid through preemption).
  std::vector<uint64_t> block_hashes;
  // Blocks of block_table the block manager has already offered to the
  // prefix cache.
  int32_t num_committed_blocks = 0;
  // The same two for the window pool's blocks (the sliding-window layers'
  // keys and values, when the engine keeps them apart), indexed like
  // block_table; entries before the window are -1 once released.
  std::vector<int32_t> window_block_table;
  int32_t num_window_committed_blocks = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_completion_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Tokens not yet in the cache: the rest of the prompt (or of a preempted
  // sequence's tokens) while prefilling, then the one token to decode.
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  std::span<const int32_t> completion() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(num_prompt_tokens));
  }
  bool finished() const { return status == SequenceStatus::kFinished; }
  // Keeps the first `n` draft tokens (and their distributions).
  void TrimDraft(size_t n) {
    if (draft.size() > n) draft.resize(n);
    if (draft_probs.size() > n) draft_probs.resize(n);
  }
};

}  // namespace kiln
