// Drafting with a second model over its own paged KV cache.
#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/forward_batch.h"
#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "core/log.h"
#include "engine/draft_distribution.h"
#include "engine/draft_model.h"
#include "engine/model_session.h"
#include "format/weight_store.h"

namespace kiln {

namespace {

// The most tokens a sequence runs in a pass that counts as drafting: the
// target's next token, after the last draft token when all were accepted.
constexpr size_t kDraftPassMaxTokens = 2;

}  // namespace

struct DraftModelProposer::Tracked {
  Tracked(RequestId id, uint64_t seed) : mirror(id, {}, SamplingParams{}), rng(seed) {}

  Sequence mirror;
  Rng rng;  // draws the tokens of sampled sequences
  uint64_t last_call = 0;
};

DraftModelProposer::DraftModelProposer(LoadedModel draft, std::unique_ptr<ModelSession> session,
                                       int64_t target_vocab)
    : draft_(std::move(draft)),
      session_(std::move(session)),
      blocks_(static_cast<int32_t>(session_->num_kv_blocks()), static_cast<int32_t>(session_->block_size()),
              /*enable_prefix_caching=*/false),
      vocab_(session_->config().vocab_size),
      draft_vocab_(std::min(vocab_, target_vocab)) {}

DraftModelProposer::~DraftModelProposer() = default;

void DraftModelProposer::Forget(RequestId id) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  blocks_.Free(it->second->mirror);
  tracked_.erase(it);
}

void DraftModelProposer::ReleaseIdle() {
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (it->second->last_call == call_) {
      ++it;
      continue;
    }
    blocks_.Free(it->second->mirror);
    it = tracked_.erase(it);
  }
}

Status DraftModelProposer::Prepare(int64_t tokens) {
  return session_->model().BindBucketsUpTo(tokens);
}

void DraftModelProposer::Propose(std::span<const DraftRequest> requests) {
  ++call_;
  timing_ = {};
  for (const DraftRequest& r : requests) {
    r.seq->draft.clear();
    r.seq->draft_probs.clear();
  }
  Status status = ProposeAll(requests);
  if (status.ok()) return;
  KILN_LOG_WARN("draft model: {}; this step decodes without drafts", status.ToString());
  for (const DraftRequest& r : requests) {
    r.seq->draft.clear();
    r.seq->draft_probs.clear();
    Forget(r.seq->id);  // its cache may hold a half-run pass: start over
  }
}

void DraftModelProposer::MarkAsked(const Sequence& seq) {
  std::unique_ptr<Tracked>& slot = tracked_[seq.id];
  if (!slot) slot = std::make_unique<Tracked>(seq.id, 0x5eedd4af7ull ^ (seq.id * 0x9e3779b97f4a7c15ull));
  slot->last_call = call_;
}

DraftModelProposer::Tracked* DraftModelProposer::Reserve(const Sequence& seq, size_t keep_limit,
                                                         size_t run_until, int32_t extra_slots,
                                                         bool may_release) {
  Tracked& t = *tracked_.at(seq.id);
  // Keep the longest prefix the cache shares with the sequence (the target
  // rejected what follows it).
  const size_t limit = std::min(t.mirror.tokens.size(), keep_limit);
  size_t keep = 0;
  while (keep < limit && t.mirror.tokens[keep] == seq.tokens[keep]) ++keep;
  t.mirror.tokens.resize(keep);
  t.mirror.num_computed_tokens = static_cast<int32_t>(keep);
  blocks_.TruncateSlots(t.mirror, static_cast<int32_t>(keep));
  const auto slots = static_cast<int32_t>(run_until - keep) + extra_slots;
  if (slots < 1) return &t;
  if (blocks_.AllocateSlots(t.mirror, slots)) return &t;
  if (!may_release) return nullptr;
  ReleaseIdle();
  return blocks_.AllocateSlots(t.mirror, slots) ? &t : nullptr;
}

Status DraftModelProposer::CatchUp(std::span<CatchUpWork> work) {
  const int64_t max_tokens = session_->max_batch_tokens();
  const auto max_seqs = static_cast<size_t>(session_->options().max_seqs);
  std::vector<PassEntry> entries;
  std::vector<size_t> in_pass;  // the work item of each entry
  // In as few passes as the draft session's limits allow; the pass that
  // reaches the end of a proposing sequence's tokens proposes its first
  // draft token.
  while (true) {
    entries.clear();
    in_pass.clear();
    int64_t budget = max_tokens;
    for (size_t i = 0; i < work.size() && budget > 0 && entries.size() < max_seqs; ++i) {
      CatchUpWork& w = work[i];
      const size_t next = w.tracked->mirror.tokens.size();
      if (next >= w.end) continue;
      const size_t take = std::min<size_t>(w.end - next, static_cast<size_t>(budget));
      entries.push_back({w.tracked, std::span<const int32_t>(w.seq->tokens).subspan(next, take),
                         w.request != nullptr && next + take == w.end});
      in_pass.push_back(i);
      budget -= static_cast<int64_t>(take);
    }
    if (entries.empty()) return Status::Ok();
    KILN_RETURN_IF_ERROR(RunPass(entries));
    size_t row = 0;
    for (size_t e = 0; e < entries.size(); ++e) {
      CatchUpWork& w = work[in_pass[e]];
      Sequence& mirror = w.tracked->mirror;
      mirror.tokens.insert(mirror.tokens.end(), entries[e].tokens.begin(), entries[e].tokens.end());
      mirror.num_computed_tokens = mirror.num_tokens();
      if (entries[e].wants_logits) {
        ProposeFrom(logits_.data() + row * static_cast<size_t>(vocab_), *w.request, *w.tracked);
        ++row;
      }
    }
  }
}

void DraftModelProposer::Prefill(std::span<const PrefillRequest> requests) {
  ++call_;
  timing_ = {};
  for (const PrefillRequest& r : requests) MarkAsked(*r.seq);
  std::vector<CatchUpWork> work;
  for (const PrefillRequest& r : requests) {
    // Never the last token: a proposal needs its logits.
    const size_t end = std::min(static_cast<size_t>(std::max(r.num_tokens, 0)), r.seq->tokens.size() - 1);
    Tracked* t = Reserve(*r.seq, end, end, 0, /*may_release=*/false);
    if (t != nullptr) work.push_back({nullptr, r.seq, t, end});
  }
  Status status = CatchUp(work);
  if (status.ok()) return;
  KILN_LOG_WARN("draft model: {}; its prefill is left to the first draft", status.ToString());
  for (const PrefillRequest& r : requests) Forget(r.seq->id);
}

Status DraftModelProposer::ProposeAll(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests) MarkAsked(*r.seq);
  // Each cache keeps what it shares with its sequence but the last token,
  // whose logits propose the first draft token; then the unseen tokens, and
  // a slot for each draft token but the last.
  std::vector<CatchUpWork> work;
  for (const DraftRequest& r : requests) {
    const size_t size = r.seq->tokens.size();
    Tracked* t = Reserve(*r.seq, size - 1, size, r.max_tokens - 1, /*may_release=*/true);
    if (t != nullptr) work.push_back({&r, r.seq, t, size});
  }
  KILN_RETURN_IF_ERROR(CatchUp(work));

  const auto max_seqs = static_cast<size_t>(session_->options().max_seqs);
  std::vector<PassEntry> entries;
  // Draft: one token per sequence and pass, every sequence that wants more
  // in the same pass.
  std::vector<int32_t> last_tokens;
  for (size_t step = 1;; ++step) {
    std::vector<size_t> active;
    for (size_t i = 0; i < work.size(); ++i) {
      const Sequence& seq = *work[i].request->seq;
      if (seq.draft.size() == step && step < static_cast<size_t>(work[i].request->max_tokens))
        active.push_back(i);
    }
    if (active.empty()) break;
    for (size_t begin = 0; begin < active.size(); begin += max_seqs) {
      const size_t end = std::min(active.size(), begin + max_seqs);
      last_tokens.clear();
      for (size_t a = begin; a < end; ++a) last_tokens.push_back(work[active[a]].request->seq->draft.back());
      entries.clear();
      for (size_t a = begin; a < end; ++a) {
        entries.push_back(
            {work[active[a]].tracked, std::span<const int32_t>(&last_tokens[a - begin], 1), true});
      }
      KILN_RETURN_IF_ERROR(RunPass(entries));
      for (size_t a = begin; a < end; ++a) {
        CatchUpWork& w = work[active[a]];
        w.tracked->mirror.tokens.push_back(last_tokens[a - begin]);
        w.tracked->mirror.num_computed_tokens = w.tracked->mirror.num_tokens();
        ProposeFrom(logits_.data() + (a - begin) * static_cast<size_t>(vocab_), *w.request, *w.tracked);
      }
    }
  }
  return Status::Ok();
}

Status DraftModelProposer::RunPass(std::span<const PassEntry> entries) {
  builder_.Clear();
  for (const PassEntry& e : entries) {
    const auto start = static_cast<int32_t>(e.tracked->mirror.tokens.size());
    for (size_t j = 0; j < e.tokens.size(); ++j)
      builder_.AddToken(e.tokens[j], start + static_cast<int32_t>(j));
    builder_.EndSequence(start + static_cast<int32_t>(e.tokens.size()), e.tracked->mirror.block_table.data());
    if (e.wants_logits) builder_.AddOutputRow(builder_.num_tokens() - 1);
  }
  const ForwardBatch fb = builder_.Batch();
  logits_.resize(static_cast<size_t>(fb.num_output_rows) * static_cast<size_t>(vocab_));
  const auto start = std::chrono::steady_clock::now();
  Status status = session_->Forward(fb, logits_.data(), vocab_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool drafting = std::all_of(entries.begin(), entries.end(), [](const PassEntry& e) {
    return e.wants_logits && e.tokens.size() <= kDraftPassMaxTokens;
  });
  if (drafting) {
    timing_.draft_passes += 1;
    timing_.draft_seconds += seconds;
  } else {
    timing_.catch_up_tokens += fb.num_tokens;
    timing_.catch_up_seconds += seconds;
    timing_.catch_up_drafts += fb.num_output_rows;
  }
  return status;
}

void DraftModelProposer::ProposeFrom(const float* logits, const DraftRequest& r, Tracked& t) {
  const SamplingParams& params = r.seq->params;
  int32_t token = 0;
  if (params.temperature == 0) {
    // The lowest id among the largest logits, as greedy sampling picks: a
    // certainty, so no distribution goes with it.
    for (int64_t i = 1; i < draft_vocab_; ++i) {
      if (logits[i] > logits[token] || std::isnan(logits[token])) token = static_cast<int32_t>(i);
    }
  } else {
    // Drawn from the draft's own distribution under the request's
    // parameters: rejection sampling's q.
    std::vector<float>& q = r.seq->draft_probs.emplace_back(static_cast<size_t>(draft_vocab_));
    DraftDistribution(logits, draft_vocab_, params, q.data());
    token = DrawFromDistribution(q.data(), draft_vocab_, t.rng);
  }
  r.seq->draft.push_back(token);
}

Expected<DraftedSessions> CreateDraftedSessions(const EngineOptions& options, const LoadedModel& target,
                                                const ModelSessionOptions& target_options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> target_model,
                        CompileForSession(*target.weights, target_options));
  KILN_ASSIGN_OR_RETURN(LoadedModel draft, LoadDraftModel(options, target));
  // The draft runs the target's batches and contexts, in floats: W8A8 is
  // the target's choice.
  ModelSessionOptions draft_options = target_options;
  draft_options.w8a8 = false;
  draft_options.w8a8_clips.clear();
  draft_options.max_model_len = target_model->max_model_len();
  // On the target's threads: the two models' passes alternate.
  CompileOptions draft_compile = ToCompileOptions(draft_options);
  draft_compile.pool = target_model->shared_pool();
  auto draft_model = CompiledModel::Compile(*draft.weights, draft_compile);
  if (!draft_model.ok())
    return draft_model.status().WithContext(fmt::format("draft model {}", options.draft_model));

  const int64_t target_block = target_model->MakeKvLayout(1).BlockBytes();
  const int64_t draft_block = (*draft_model)->MakeKvLayout(1).BlockBytes();
  KILN_ASSIGN_OR_RETURN(int64_t num_blocks, SharedKvCacheBlocks(target_options, target_model->max_model_len(),
                                                                target_block, draft_block));
  ModelSessionOptions sized_target = target_options;
  sized_target.kv_num_blocks = num_blocks;
  draft_options.kv_num_blocks = num_blocks;
  DraftedSessions out;
  KILN_ASSIGN_OR_RETURN(out.target, ModelSession::Create(std::move(target_model), sized_target));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelSession> draft_session,
                        ModelSession::Create(std::move(draft_model).value(), draft_options));
  KILN_LOG_INFO("kv cache: target {} blocks ({} MiB), draft {} blocks ({} MiB)", num_blocks,
                num_blocks * target_block >> 20, num_blocks, num_blocks * draft_block >> 20);
  out.proposer = std::make_unique<DraftModelProposer>(std::move(draft), std::move(draft_session),
                                                      target.weights->config().vocab_size);
  return out;
}

}  // namespace kiln
