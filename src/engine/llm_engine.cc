// The engine loop: admit, schedule, run one pass, hand out tokens.
#include "engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>

#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "compiler/profiler.h"
#include "core/log.h"
#include "core/utf8.h"
#include "engine/block_manager.h"
#include "engine/draft_model_proposer.h"
#include "engine/draft_proposer.h"
#include "engine/grammar_compiler.h"
#include "engine/kv_block_copy.h"
#include "engine/kv_connector.h"
#include "engine/kv_layer_sender.h"
#include "engine/kv_transfer_receiver.h"
#include "engine/model_runner.h"
#include "engine/model_session.h"
#include "engine/ngram_proposer.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/spec_cost_meter.h"
#include "engine/stop_string_filter.h"
#include "engine/tensor_dump.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace kiln {

// Everything the engine keeps about one request besides what the
// scheduler sees.
struct LLMEngine::Request {
  Request(RequestId id, std::vector<int32_t> prompt, SamplingParams params)
      : seq(id, std::move(prompt), std::move(params)), stop_filter(seq.params.stop) {}

  Sequence seq;
  TokenCallback on_token;
  std::optional<StreamingDecoder> decoder;  // absent without a tokenizer
  StopStringFilter stop_filter;
  uint64_t kv_transfer_id = 0;  // non-zero: its prompt blocks go to the KV connector
  int32_t kv_blocks_sent = 0;   // the first this many have gone
};

double EngineClock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// A finished request's life on a track of its own: the whole request, and
// within it the wait for its first step, the steps up to its first token,
// and the rest (EngineClock reads the steady clock).
void RecordRequestSpans(const Sequence& seq) {
  const RequestStats& st = seq.stats;
  // Arrival, first step, first token, finish; -1 where it never came.
  const double seconds[] = {st.arrival_time, st.first_scheduled_time, st.first_token_time, st.finish_time};
  int64_t times[4];
  for (int i = 0; i < 4; ++i) times[i] = static_cast<int64_t>(std::llround(std::max(seconds[i], 0.0) * 1e9));
  ProfileTimesOfSteadyClock(times);
  const uint32_t track = kRequestTrackBase + static_cast<uint32_t>(seq.id);
  NameProfileTrack(track, fmt::format("request {}", seq.id));
  auto span = [&](std::string name, int from, int to) {
    if (seconds[from] < 0 || seconds[to] < seconds[from]) return;
    ProfileEvent e;
    e.name = std::move(name);
    e.category = "request";
    e.start_ns = times[from];
    e.duration_ns = times[to] - times[from];
    e.track = track;
    RecordProfileEvent(std::move(e));
  };
  span(fmt::format("request {}", seq.id), 0, 3);
  span("queued", 0, 1);
  span("to first token", 1, 2);
  span("decode", 2, 3);
}

}  // namespace

LLMEngine::LLMEngine(LoadedModel model, const EngineOptions& options)
    : model_(std::move(model)), options_(options) {}

LLMEngine::~LLMEngine() = default;

Expected<std::unique_ptr<LLMEngine>> LLMEngine::Create(const EngineOptions& options) {
  KILN_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(options, TokenizerLoad::kInBackground));
  return Create(std::move(model), options);
}

Expected<std::unique_ptr<LLMEngine>> LLMEngine::Create(LoadedModel model, const EngineOptions& options) {
  KILN_RETURN_IF_ERROR(options.Validate());
  if (model.weights == nullptr) return InvalidArgument("engine: no weights");
  auto engine = std::unique_ptr<LLMEngine>(new LLMEngine(std::move(model), options));
  KILN_RETURN_IF_ERROR(engine->Init());
  return engine;
}

Status LLMEngine::Init() {
  const ModelConfig& config = model_.weights->config();
  // W8A8 calibration encodes text before the session exists.
  if (options_.w8a8) KILN_RETURN_IF_ERROR(model_.FinishTokenizer());
  KILN_ASSIGN_OR_RETURN(ModelSessionOptions session_options, SessionOptionsFor(options_, model_));
  // The window pool needs window block tables in every pass, which only
  // this process's CPU passes of the model alone carry.
  session_options.kv_window_pool = options_.kv_window_free && options_.backend == "cpu" &&
                                   options_.tensor_parallel_size == 1 && options_.pipeline_parallel_size == 1 &&
                                   options_.spec_method != "draft";
  if (options_.spec_method == "draft") {
    // The draft model's KV cache comes out of the same budget.
    KILN_ASSIGN_OR_RETURN(DraftedSessions drafted, CreateDraftedSessions(options_, model_, session_options));
    session_ = std::move(drafted.target);
    proposer_ = std::move(drafted.proposer);
  } else {
    KILN_ASSIGN_OR_RETURN(session_, ModelSession::Create(*model_.weights, session_options));
  }
  // The tokenizer was being built while the model compiled.
  KILN_RETURN_IF_ERROR(model_.FinishTokenizer());
  const int64_t num_blocks = session_->num_kv_blocks();
  const int64_t block_bytes = session_->kv_cache().layout().BlockBytes();
  blocks_ = std::make_unique<BlockManager>(static_cast<int32_t>(num_blocks), options_.block_size,
                                           options_.enable_prefix_caching);
  const int64_t num_window_blocks = session_->num_window_kv_blocks();
  if (num_window_blocks > 0) {
    window_blocks_ =
        std::make_unique<BlockManager>(static_cast<int32_t>(num_window_blocks), options_.block_size,
                                       options_.enable_prefix_caching, static_cast<int32_t>(config.sliding_window));
  }
  SchedulerConfig sc;
  sc.max_num_seqs = options_.max_num_seqs;
  sc.max_num_batched_tokens = options_.max_num_batched_tokens;
  sc.max_prefill_chunk = options_.max_prefill_chunk;
  scheduler_ = std::make_unique<Scheduler>(sc, *blocks_, window_blocks_.get());
  runner_ = std::make_unique<ModelRunner>(*session_);
  draft_length_.max_tokens = options_.spec_tokens;
  if (options_.spec_method == "ngram") {
    proposer_ = std::make_unique<NgramProposer>(
        NgramConfig{.min_n = options_.spec_ngram_min, .max_n = options_.spec_ngram_max});
  }
  if (proposer_) {
    draft_length_.stop_instead_of_pause = options_.spec_adaptive && proposer_->catches_up();
    // Verification passes (and a draft model's) come in sizes that plain
    // decoding never runs: their programs are bound now, not while the
    // first requests decode.
    const int64_t max_verifying =
        options_.spec_max_batch > 0 ? options_.spec_max_batch : SpecCostMeter::kMaxSeqs;
    const int64_t pass_tokens = max_verifying * (options_.spec_tokens + 1);
    KILN_RETURN_IF_ERROR(session_->model().BindBucketsUpTo(pass_tokens));
    KILN_RETURN_IF_ERROR(proposer_->Prepare(pass_tokens));
  }
  if (proposer_ && options_.spec_adaptive && options_.spec_measure_costs) {
    cost_meter_ = std::make_unique<SpecCostMeter>();
  }
  if (model_.tokenizer) grammars_ = std::make_unique<GrammarCompiler>(*model_.tokenizer);
  if (!options_.dump_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(dumper_, TensorDumper::Create(options_.dump_dir));
  }

  // End-of-generation ids from every source that names them.
  if (model_.tokenizer) eos_ids_ = model_.tokenizer->end_of_generation_ids();
  for (int32_t id : model_.generation.eos_token_ids) eos_ids_.push_back(id);
  for (int64_t id : config.eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  eos_set_.insert(eos_ids_.begin(), eos_ids_.end());

  seed_base_ =
      options_.seed != 0 ? options_.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  counters_.kv_blocks_total = num_blocks;
  counters_.kv_window_blocks_total = num_window_blocks;
  if (window_blocks_) {
    const KvCacheLayout& layout = session_->kv_cache().layout();
    KILN_LOG_INFO(
        "engine: {} KV blocks of {} tokens for {} full-attention layers ({} MiB) and {} for {} sliding-window "
        "layers ({} MiB, freed out of the {}-token window), max model length {}, {} sequences, {} tokens per "
        "step; {} in {:.1f} ms",
        num_blocks, options_.block_size, layout.num_layers - layout.NumWindowLayers(),
        num_blocks * layout.FullBlockBytes() >> 20, num_window_blocks, layout.NumWindowLayers(),
        num_window_blocks * layout.WindowBlockBytes() >> 20, config.sliding_window, session_->max_model_len(),
        options_.max_num_seqs, options_.max_num_batched_tokens,
        session_->model().report().from_artifact ? "bound from the artifact's plans" : "compiled",
        session_->model().report().compile_seconds * 1e3);
  } else {
    KILN_LOG_INFO(
        "engine: {} KV blocks of {} tokens ({} MiB), max model length {}, {} sequences, {} tokens per step; "
        "{} in {:.1f} ms",
        num_blocks, options_.block_size, num_blocks * block_bytes >> 20, session_->max_model_len(),
        options_.max_num_seqs, options_.max_num_batched_tokens,
        session_->model().report().from_artifact ? "bound from the artifact's plans" : "compiled",
        session_->model().report().compile_seconds * 1e3);
  }
  if (proposer_) {
    KILN_LOG_INFO("engine: speculative decoding by {}, up to {} draft tokens per sequence{}{}",
                  options_.spec_method, options_.spec_tokens,
                  !options_.spec_adaptive ? ""
                  : cost_meter_           ? " (adaptive, weighing measured costs)"
                                          : " (adaptive)",
                  options_.spec_max_batch > 0
                      ? fmt::format(", in steps of at most {} decoding sequences", options_.spec_max_batch)
                      : "");
  }
  return Status::Ok();
}

const ModelConfig& LLMEngine::model_config() const {
  return model_.weights->config();
}
const CompiledModel& LLMEngine::compiled_model() const {
  return session_->model();
}
const KvCache& LLMEngine::kv_cache() const {
  return session_->kv_cache();
}
int64_t LLMEngine::max_model_len() const {
  return session_->max_model_len();
}
int32_t LLMEngine::num_kv_blocks() const {
  return blocks_->num_blocks();
}
int32_t LLMEngine::num_window_kv_blocks() const {
  return window_blocks_ ? window_blocks_->num_blocks() : 0;
}

Expected<std::vector<int32_t>> LLMEngine::PromptIds(const GenerationRequest& request) const {
  if (!request.prompt_ids.empty()) return request.prompt_ids;
  if (request.prompt.empty()) return InvalidArgument("the prompt is empty");
  if (!model_.tokenizer) {
    return InvalidArgument(
        "a text prompt needs a tokenizer; this model has none (give --tokenizer, or token ids)");
  }
  std::vector<int32_t> ids = model_.tokenizer->Encode(request.prompt, request.add_special_tokens);
  if (ids.empty()) return InvalidArgument("the prompt encodes to no tokens");
  return ids;
}

Expected<RequestId> LLMEngine::AddRequest(GenerationRequest request) {
  const SamplingParams& params = request.params;
  KILN_RETURN_IF_ERROR(params.Validate());
  for (const std::string& stop : params.stop) {
    if (!IsValidUtf8(stop)) return InvalidArgument("stop string is not valid UTF-8");
  }
  if (!params.stop.empty() && !model_.tokenizer) return InvalidArgument("stop strings need a tokenizer");
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(request));
  const int64_t vocab = model_config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      return OutOfRange("prompt token {} is id {}, outside the vocabulary of {}", i, prompt[i], vocab);
    }
  }
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  if (static_cast<int64_t>(prompt.size()) >= max_model_len()) {
    return OutOfRange(
        "prompt of {} tokens does not fit the context of {} tokens (room is needed for at least one "
        "new token)",
        prompt.size(), max_model_len());
  }
  if (total > max_model_len()) {
    return OutOfRange("prompt of {} tokens plus max_tokens {} exceeds the context of {} tokens",
                      prompt.size(), params.max_tokens, max_model_len());
  }
  if (blocks_->BlocksForTokens(total) > blocks_->num_blocks()) {
    return ResourceExhausted(
        "prompt of {} tokens plus max_tokens {} needs {} KV blocks, more than the whole cache of {}; raise "
        "--kv-cache-memory",
        prompt.size(), params.max_tokens, blocks_->BlocksForTokens(total), blocks_->num_blocks());
  }

  if (request.kv_transfer_id != 0 && !kv_connector_) {
    return InvalidArgument("a KV transfer needs a KV connector (serve with --role prefill)");
  }

  std::shared_ptr<const TokenGrammar> grammar;
  if (params.constrained()) {
    if (!grammars_) return InvalidArgument("structured output (a grammar or JSON schema) needs a tokenizer");
    KILN_ASSIGN_OR_RETURN(grammar, grammars_->Compile(params));
  }

  RequestId id = next_id_.fetch_add(1);
  auto r = std::make_unique<Request>(id, std::move(prompt), params);
  if (grammar) r->seq.constraint = std::make_unique<OutputConstraint>(std::move(grammar), params.grammar_triggers);
  r->on_token = std::move(request.on_token);
  r->kv_transfer_id = request.kv_transfer_id;
  r->seq.sampler = MakeSamplerState(params, r->seq.tokens, vocab,
                                    seed_base_ ^ (static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ull));
  r->seq.stats.arrival_time = EngineClock();
  if (model_.tokenizer) {
    r->decoder.emplace(*model_.tokenizer, params.skip_special_tokens, /*at_text_start=*/false);
  }
  num_unfinished_.fetch_add(1);
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_adds_.push_back(std::move(r));
  return id;
}

void LLMEngine::Abort(RequestId id) {
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_aborts_.push_back(id);
}

void LLMEngine::DrainPending() {
  std::vector<std::unique_ptr<Request>> adds;
  std::vector<RequestId> aborts;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    adds.swap(pending_adds_);
    aborts.swap(pending_aborts_);
  }
  for (auto& r : adds) {
    Sequence* seq = &r->seq;
    requests_.emplace(seq->id, std::move(r));
    scheduler_->Add(seq);
  }
  double now = EngineClock();
  for (RequestId id : aborts) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    TokenEvent event;
    event.text = it->second->stop_filter.Finish();
    FinishRequest(*it->second, FinishReason::kAbort, std::move(event), now);
  }
}

void LLMEngine::StoppedDrafting(RequestId id, StepTally& tally) {
  proposer_->Forget(id);  // its draft cache is given back
  ++tally.stopped_drafting;
}

void LLMEngine::ProposeDrafts(StepTally& tally) {
  if (!proposer_) return;
  auto decoding = [](const Sequence* seq) {
    return seq->num_uncomputed_tokens() == 1 && seq->num_computed_tokens >= seq->num_prompt_tokens;
  };
  const auto num_decoding = static_cast<int32_t>(
      std::count_if(scheduler_->running().begin(), scheduler_->running().end(), decoding));
  // Past a batch size the pass is no longer bound by reading the weights,
  // and verifying drafts costs more than the tokens it gains.
  if (options_.spec_max_batch > 0 && num_decoding > options_.spec_max_batch) return;
  if (cost_meter_) {
    // Now and then a step without drafts times the plain pass that the
    // costs are shares of.
    if (cost_meter_->WantsPlainPass(num_decoding)) return;
    draft_length_.row_cost = cost_meter_->row_cost();
    draft_length_.draft_cost = cost_meter_->draft_cost();
    draft_length_.costs_settled = cost_meter_->settled();
  }
  std::vector<DraftRequest> wanted;
  for (Sequence* seq : scheduler_->running()) {
    // A lazy grammar not yet triggered cannot take back draft tokens.
    const bool grammar_ok =
        !seq->constraint || seq->constraint->active() || !seq->constraint->abandoned().empty();
    if (!decoding(seq) || !grammar_ok) continue;
    // Every token the pass could yield (the draft and the model's next)
    // must fit within max_tokens and the context.
    const int64_t room = std::min<int64_t>(seq->params.max_tokens - seq->num_completion_tokens() - 1,
                                           max_model_len() - seq->num_tokens());
    const bool was_stopped = seq->draft_length.stopped();
    const int32_t length =
        options_.spec_adaptive ? seq->draft_length.Next(draft_length_) : options_.spec_tokens;
    // Stopped before drafting: the costs alone rule every draft out.
    if (!was_stopped && seq->draft_length.stopped()) StoppedDrafting(seq->id, tally);
    const auto max_tokens = static_cast<int32_t>(std::min<int64_t>(length, room));
    if (max_tokens > 0) wanted.push_back({seq, max_tokens});
  }
  if (wanted.empty()) return;
  const double propose_start = EngineClock();
  proposer_->Propose(wanted);
  const double propose_seconds = EngineClock() - propose_start;
  const DraftTiming timing = proposer_->last_timing();
  tally.catch_up_seconds += timing.catch_up_seconds;
  if (cost_meter_) {
    // What the draft tokens cost is the proposer's time less its catching
    // up (the tokens decoded while a sequence drafted nothing), over the
    // tokens that cost drafting.
    int32_t draft_tokens = -timing.catch_up_drafts;
    for (const DraftRequest& r : wanted) draft_tokens += static_cast<int32_t>(r.seq->draft.size());
    cost_meter_->RecordDrafting(static_cast<int32_t>(wanted.size()), draft_tokens,
                                propose_seconds - timing.catch_up_seconds);
  }
  // Draft tokens a grammar forbids would be rejected anyway; they are cut
  // so that the pass does not compute them.
  for (const DraftRequest& r : wanted) {
    if (r.seq->constraint && r.seq->constraint->active() && !r.seq->draft.empty()) {
      r.seq->TrimDraft(r.seq->constraint->AllowedPrefix(r.seq->draft));
    }
  }
}

Status LLMEngine::Step() {
  if (kv_connector_) ReceiveKv();
  DrainPending();
  if (!scheduler_->HasUnfinished()) {
    UpdateCounters(nullptr);  // aborts may have freed blocks
    return Status::Ok();
  }
  // Profiled, the step is one span whose parts are spans of their own
  // (drafting, scheduling, the runner's, handling the tokens), so that
  // they add up to it.
  const bool profiling = ProfilingEnabled();
  const int64_t start_ns = profiling ? ProfileNow() : 0;
  const double start = EngineClock();
  StepTally tally;
  if (proposer_) {
    ProfileScope span("propose drafts", "engine");
    ProposeDrafts(tally);
  }
  const double drafted = EngineClock();
  ScheduledBatch batch;
  {
    ProfileScope span("schedule", "engine");
    batch = scheduler_->Schedule();
  }
  if (proposer_) {
    ProfileScope span("draft prefill", "engine");
    for (Sequence* seq : batch.preempted) proposer_->Forget(seq->id);
    // Sequences take their prompt into the proposer beside the target's
    // prefill (every decoding sequence may draft).
    std::vector<PrefillRequest> prefills;
    for (const ScheduledSequence& s : batch.seqs) {
      if (s.start < s.seq->num_prompt_tokens && !s.seq->draft_length.stopped()) {
        prefills.push_back({s.seq, s.start + s.num_tokens});
      }
    }
    if (!prefills.empty()) proposer_->Prefill(prefills);
  }
  if (batch.empty()) {
    return Internal("scheduler: {} requests wait but none could be scheduled", scheduler_->waiting().size());
  }
  int32_t draft_rows = 0;
  for (const ScheduledSequence& s : batch.seqs) {
    if (s.seq->stats.first_scheduled_time < 0) s.seq->stats.first_scheduled_time = start;
    bool decoding = s.num_tokens - s.num_draft_tokens == 1 && s.start >= s.seq->num_prompt_tokens;
    (decoding ? tally.decode_tokens : tally.prefill_tokens) += s.num_tokens;
    draft_rows += s.num_draft_tokens;
  }
  const ProfilePhase phase = tally.prefill_tokens > 0 ? ProfilePhase::kPrefill : ProfilePhase::kDecode;
  if (profiling) SetProfilePhase(phase);

  const KvLayerCallback on_kv_layer = kv_layer_sender_ ? PlanKvLayerSends(batch) : KvLayerCallback{};
  const double pass_start = EngineClock();
  auto drawn = runner_->Run(batch, dumper_.get(), on_kv_layer);
  if (cost_meter_ && drawn.ok() && tally.prefill_tokens == 0) {
    // A pass of decoding sequences only: a plain pass, or one with drafts.
    cost_meter_->RecordPass(static_cast<int32_t>(batch.seqs.size()), draft_rows, EngineClock() - pass_start);
  } else if (cost_meter_) {
    cost_meter_->RecordOtherPass();
  }
  if (!drawn.ok()) {
    double now = EngineClock();
    for (const ScheduledSequence& s : batch.seqs) {
      TokenEvent event;
      FinishRequest(*requests_.at(s.seq->id), FinishReason::kError, std::move(event), now);
    }
    StepTally failed;  // nothing was computed
    failed.seconds = now - start;
    // Slices that went are counted, their blocks not: the requests' transfers
    // end with the blocks sent before, and the decode side, finding blocks
    // partial or more blocks than that, refuses them and frees the partial.
    if (kv_layer_sender_) failed.kv_layer_slices_sent = kv_layer_sender_->slices_sent();
    UpdateCounters(&failed);
    if (profiling) SetProfilePhase(ProfilePhase::kNone);
    return drawn.status().WithContext("engine step");
  }
  {
    ProfileScope span("handle tokens", "engine");
    scheduler_->OnBatchComputed(batch);
    // Before the samples are handled: a request that finishes now frees
    // its blocks, which the next pass may overwrite.
    if (kv_layer_sender_) {
      tally.kv_layer_slices_sent = kv_layer_sender_->slices_sent();
      tally.kv_blocks_sent = FinishKvLayerSends(batch);
    } else if (kv_connector_) {
      tally.kv_blocks_sent = SendKv(batch);
    }
    const double now = EngineClock();
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      const std::vector<SampleResult>& tokens = (*drawn)[i];
      if (tokens.empty()) continue;
      const ScheduledSequence& s = batch.seqs[i];
      Request& r = *requests_.at(s.seq->id);
      const auto num_accepted = static_cast<int32_t>(tokens.size()) - 1;
      if (s.num_draft_tokens > 0) {
        tally.verifications += 1;
        tally.draft_tokens += s.num_draft_tokens;
        tally.rejected_draft_tokens += s.num_draft_tokens - num_accepted;
        if (s.seq->draft_length.Record(draft_length_, s.num_draft_tokens, num_accepted)) {
          StoppedDrafting(s.seq->id, tally);
        }
      }
      bool running = true;
      for (const SampleResult& token : tokens) {
        ++tally.sampled;
        running = HandleSample(r, token, now);
        if (!running) break;  // the tokens after a stop are dropped
      }
      if (running && s.num_draft_tokens > 0) scheduler_->OnDraftVerified(s.seq, num_accepted);
    }
    tally.seconds = EngineClock() - start;
    tally.draft_seconds = proposer_ ? drafted - start : 0.0;  // without a proposer, nothing was drafted
    UpdateCounters(&tally);
    if (profiling) {
      RecordProfileCounter("engine", {{"kv_blocks_used", static_cast<double>(blocks_->num_used_blocks())},
                                      {"batch_size", static_cast<double>(batch.seqs.size())},
                                      {"queue_length", static_cast<double>(scheduler_->waiting().size())}});
    }
  }
  if (profiling) {
    RecordProfileSpan(phase == ProfilePhase::kPrefill ? "prefill step" : "decode step", "step", start_ns);
    SetProfilePhase(ProfilePhase::kNone);
  }
  return Status::Ok();
}

bool LLMEngine::HandleSample(Request& r, const SampleResult& sample, double now) {
  Sequence& seq = r.seq;
  const SamplingParams& params = seq.params;
  const int32_t token = sample.token;
  if (token < 0) {
    // Only a grammar's mask leaves nothing to draw: the output cannot go on.
    KILN_LOG_WARN("request {}: its grammar accepts no further token after {} tokens; ending it", seq.id,
                  seq.num_completion_tokens());
    TokenEvent event;
    if (r.decoder) event.text = r.stop_filter.Push(r.decoder->Flush(), true) + r.stop_filter.Finish();
    FinishRequest(r, FinishReason::kStop, std::move(event), now);
    return false;
  }
  if (seq.constraint) {
    const bool had_abandoned = !seq.constraint->abandoned().empty();
    if (!seq.constraint->Accept(token)) {
      KILN_LOG_ERROR("request {}: sampled token {} outside its grammar", seq.id, token);
    } else if (!had_abandoned && !seq.constraint->abandoned().empty()) {
      KILN_LOG_WARN("request {}: output left unconstrained: {}", seq.id, seq.constraint->abandoned());
    }
  }
  seq.tokens.push_back(token);  // the model runner recorded it in the sampler state
  seq.stats.completion_tokens = seq.num_completion_tokens();
  if (seq.stats.first_token_time < 0) seq.stats.first_token_time = now;
  seq.stats.last_token_time = now;

  TokenEvent event;
  event.request_id = seq.id;
  event.token = token;
  if (params.logprobs || params.top_logprobs > 0) {
    event.logprob = sample.logprob;
    event.top_logprobs = sample.top;
  }
  const bool may_stop = seq.num_completion_tokens() >= params.min_tokens;
  const bool stop_id = (!params.ignore_eos && eos_set_.count(token) > 0) ||
                       std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) !=
                           params.stop_token_ids.end();
  FinishReason reason = FinishReason::kNone;
  if (may_stop && stop_id) {
    reason = FinishReason::kStop;  // the stop id's own text is not output
  } else if (r.decoder) {
    event.text = r.stop_filter.Push(r.decoder->Add(token), may_stop);
    if (r.stop_filter.stopped()) reason = FinishReason::kStop;
  }
  if (reason == FinishReason::kNone &&
      (seq.num_completion_tokens() >= params.max_tokens || seq.num_tokens() >= max_model_len())) {
    reason = FinishReason::kLength;
  }
  if (reason == FinishReason::kNone) {
    if (r.on_token) r.on_token(event);
    return true;
  }
  // The end: release what the decoder and the stop filter still hold.
  if (r.decoder && !r.stop_filter.stopped()) {
    event.text += r.stop_filter.Push(r.decoder->Flush(), may_stop);
    if (r.stop_filter.stopped()) reason = FinishReason::kStop;
    event.text += r.stop_filter.Finish();
  }
  FinishRequest(r, reason, std::move(event), now);
  return false;
}

void LLMEngine::FinishRequest(Request& r, FinishReason reason, TokenEvent event, double now) {
  Sequence& seq = r.seq;
  scheduler_->Finish(&seq);
  if (proposer_) proposer_->Forget(seq.id);
  seq.stats.finish_reason = reason;
  seq.stats.finish_time = now;
  event.request_id = seq.id;
  event.finished = true;
  event.stats = &seq.stats;
  if (ProfilingEnabled()) RecordRequestSpans(seq);
  if (r.kv_transfer_id != 0 && kv_connector_) {
    kv_connector_->EndTransfer({.transfer_id = r.kv_transfer_id, .num_blocks = r.kv_blocks_sent});
  }
  TokenCallback callback = std::move(r.on_token);
  RequestId id = seq.id;
  if (callback) callback(event);
  requests_.erase(id);
  num_unfinished_.fetch_sub(1);
  std::lock_guard<std::mutex> lock(counters_mu_);
  counters_.requests_finished += 1;
}

void LLMEngine::UpdateCounters(const StepTally* step) {
  size_t pending = 0;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending = pending_adds_.size();
  }
  std::lock_guard<std::mutex> lock(counters_mu_);
  EngineCounters& c = counters_;
  c.num_running = static_cast<int64_t>(scheduler_->running().size());
  c.num_waiting = static_cast<int64_t>(scheduler_->waiting().size() + pending);
  c.kv_blocks_used = blocks_->num_used_blocks();
  if (window_blocks_) {
    c.kv_window_blocks_used = window_blocks_->num_used_blocks();
    int64_t most = 0;
    for (const Sequence* seq : scheduler_->running()) {
      most = std::max<int64_t>(
          most, static_cast<int64_t>(seq->window_block_table.size()) - window_blocks_->FirstWindowEntry(*seq));
    }
    c.kv_window_blocks_per_seq_max = most;
  }
  c.prefix_cache_queries = blocks_->prefix_stats().queries;
  c.prefix_cache_hits = blocks_->prefix_stats().hits;
  c.num_preemptions = scheduler_->num_preemptions();
  if (step == nullptr) return;
  c.steps += 1;
  c.prompt_tokens_computed += step->prefill_tokens;
  c.decode_tokens_computed += step->decode_tokens - step->rejected_draft_tokens;
  c.spec_verifications += step->verifications;
  c.spec_draft_tokens += step->draft_tokens;
  c.spec_accepted_tokens += step->draft_tokens - step->rejected_draft_tokens;
  c.generation_tokens += step->sampled;
  c.kv_blocks_sent += step->kv_blocks_sent;
  c.kv_layer_slices_sent += step->kv_layer_slices_sent;
  c.spec_draft_seconds += step->draft_seconds;
  c.spec_catch_up_seconds += step->catch_up_seconds;
  c.spec_stopped_requests += step->stopped_drafting;
  if (cost_meter_) {
    c.spec_row_cost = cost_meter_->row_measured() ? cost_meter_->row_cost() : 0.0;
    c.spec_draft_cost = cost_meter_->draft_measured() ? cost_meter_->draft_cost() : 0.0;
  }
  int64_t tokens = step->prefill_tokens + step->decode_tokens;
  const double pass_seconds = step->seconds - step->draft_seconds;
  if (tokens > 0) {
    c.prefill_seconds +=
        pass_seconds * static_cast<double>(step->prefill_tokens) / static_cast<double>(tokens);
    c.decode_seconds += pass_seconds * static_cast<double>(step->decode_tokens) / static_cast<double>(tokens);
  }
}

KvPeerIdentity LLMEngine::KvIdentity(std::string model_hash) const {
  const KvCacheLayout& layout = session_->kv_cache().layout();
  KvPeerIdentity id;
  id.model_hash = std::move(model_hash);
  id.block_size = options_.block_size;
  id.kv_dtype = layout.dtype;
  id.num_layers = layout.num_layers;
  id.num_kv_heads = layout.num_kv_heads;
  id.head_dim = layout.head_dim;
  return id;
}

Status LLMEngine::AttachKvConnector(std::unique_ptr<KvConnector> connector, double transfer_timeout_seconds,
                                    bool send_per_layer) {
  if (!options_.enable_prefix_caching) {
    return InvalidArgument("a KV transfer between instances needs prefix caching (drop --no-prefix-caching)");
  }
  if (options_.backend != "cpu") {
    return Unsupported("KV transfers between instances: the KV cache of backend {} is outside host memory",
                       options_.backend);
  }
  if (transfer_timeout_seconds <= 0) return InvalidArgument("the KV transfer time-out must be positive");
  if (window_blocks_) {
    return Unsupported(
        "KV transfers between instances send one block table per sequence; this engine keeps the sliding-window "
        "layers apart (start it with --kv-window-free=false)");
  }
  kv_connector_ = std::move(connector);
  kv_receiver_ = std::make_unique<KvTransferReceiver>(*blocks_, session_->kv_cache(), transfer_timeout_seconds);
  // Ranks beyond this process hold the other parts of the cache; their
  // layers are written where no callback reaches.
  const bool single_process = options_.tensor_parallel_size == 1 && options_.pipeline_parallel_size == 1;
  if (send_per_layer && single_process && kv_connector_->SendsPerLayer()) {
    kv_layer_sender_ = std::make_unique<KvLayerSender>(*kv_connector_, session_->kv_cache());
  }
  return Status::Ok();
}

bool LLMEngine::HasOpenKvTransfers() const { return kv_receiver_ && kv_receiver_->num_open_transfers() > 0; }

void LLMEngine::ReceiveKv() {
  KvLanded landed = kv_connector_->TakeLanded();
  const double now = EngineClock();
  int64_t completed = 0;
  const int64_t blocks_before = kv_receiver_->blocks_installed();
  const int64_t slices_before = kv_receiver_->layer_slices_installed();
  for (const KvBlockPayload& block : landed.blocks) {
    Status status = kv_receiver_->Install(block, now);
    if (!status.ok()) KILN_LOG_WARN("{}", status.ToString());
  }
  const int64_t received = kv_receiver_->blocks_installed() - blocks_before;
  const int64_t slices = kv_receiver_->layer_slices_installed() - slices_before;
  for (const KvTransferEnd& end : landed.ends) {
    const bool ok = kv_receiver_->End(end);
    if (!ok) KILN_LOG_WARN("KV transfer {:#x} ended incomplete ({} blocks sent)", end.transfer_id, end.num_blocks);
    completed += ok ? 1 : 0;
    kv_connector_->Acknowledge(end.transfer_id, ok);
  }
  const std::vector<uint64_t> expired = kv_receiver_->Expire(now);
  for (uint64_t id : expired) {
    KILN_LOG_WARN("KV transfer {:#x}: nothing arrived for the time-out; its blocks are freed", id);
  }
  if (slices == 0 && completed == 0 && expired.empty()) return;
  std::lock_guard<std::mutex> lock(counters_mu_);
  counters_.kv_blocks_received += received;
  counters_.kv_layer_slices_received += slices;
  counters_.kv_transfers_completed += completed;
  counters_.kv_transfers_expired += static_cast<int64_t>(expired.size());
  counters_.kv_blocks_used = blocks_->num_used_blocks();
}

int64_t LLMEngine::SendKv(const ScheduledBatch& batch) {
  int64_t sent = 0;
  const int32_t block_size = options_.block_size;
  for (const ScheduledSequence& s : batch.seqs) {
    Request& r = *requests_.at(s.seq->id);
    if (r.kv_transfer_id == 0) continue;
    const Sequence& seq = r.seq;
    // Full blocks of the prompt whose keys and values are computed (and
    // hashed: the scheduler offered them to the prefix cache).
    const int32_t full = std::min({seq.num_computed_tokens / block_size, seq.num_prompt_tokens / block_size,
                                   static_cast<int32_t>(seq.block_table.size()),
                                   static_cast<int32_t>(seq.block_hashes.size())});
    for (int32_t i = r.kv_blocks_sent; i < full; ++i) {
      const auto at = static_cast<size_t>(i);
      KvBlockPayload block;
      block.transfer_id = r.kv_transfer_id;
      block.block_index = i;
      block.parent_hash = i == 0 ? BlockManager::kRootHash : seq.block_hashes[at - 1];
      block.hash = seq.block_hashes[at];
      block.layer_begin = 0;
      block.layer_end = static_cast<int32_t>(session_->kv_cache().layout().num_layers);
      block.tokens.assign(seq.tokens.begin() + static_cast<std::ptrdiff_t>(at) * block_size,
                          seq.tokens.begin() + static_cast<std::ptrdiff_t>(at + 1) * block_size);
      block.data = ReadKvBlock(session_->kv_cache(), seq.block_table[at]);
      kv_connector_->Send(std::move(block));
      ++sent;
    }
    r.kv_blocks_sent = std::max(r.kv_blocks_sent, full);
  }
  return sent;
}

KvLayerCallback LLMEngine::PlanKvLayerSends(const ScheduledBatch& batch) {
  kv_layer_sender_->Clear();
  const int32_t block_size = options_.block_size;
  for (const ScheduledSequence& s : batch.seqs) {
    const Request& r = *requests_.at(s.seq->id);
    if (r.kv_transfer_id == 0) continue;
    const Sequence& seq = r.seq;
    // Full blocks of the prompt whose keys and values are all computed once
    // this pass is done.
    const int32_t computed = std::min(s.start + s.num_tokens, seq.num_prompt_tokens);
    const int32_t full = std::min(computed / block_size, static_cast<int32_t>(seq.block_table.size()));
    uint64_t parent = BlockManager::kRootHash;
    for (int32_t i = 0; i < full; ++i) {
      const auto at = static_cast<size_t>(i);
      const std::span<const int32_t> tokens(seq.tokens.data() + at * static_cast<size_t>(block_size),
                                            static_cast<size_t>(block_size));
      // The scheduler hashes a block once a pass has computed it: the ones
      // this pass completes are hashed here the same way.
      const uint64_t hash =
          at < seq.block_hashes.size() ? seq.block_hashes[at] : BlockManager::ChainHash(parent, tokens);
      if (i >= r.kv_blocks_sent) {
        KvLayerSender::PlannedBlock b;
        b.transfer_id = r.kv_transfer_id;
        b.block_index = i;
        b.parent_hash = parent;
        b.hash = hash;
        b.tokens.assign(tokens.begin(), tokens.end());
        b.cache_block = seq.block_table[at];
        kv_layer_sender_->Plan(std::move(b));
      }
      parent = hash;
    }
  }
  return kv_layer_sender_->Callback();
}

int64_t LLMEngine::FinishKvLayerSends(const ScheduledBatch& batch) {
  const auto num_layers = static_cast<int32_t>(session_->kv_cache().layout().num_layers);
  if (kv_layer_sender_->planned().empty()) return 0;
  kv_layer_sender_->SendLayersLeft();
  if (kv_layer_sender_->layers_sent() != num_layers) {
    // The runtime called back out of layer order: the blocks stay partial
    // on the other side, and their transfers fail there.
    KILN_LOG_ERROR("KV layer sender: {} of {} layers sent in a pass", kv_layer_sender_->layers_sent(), num_layers);
    return 0;
  }
  std::unordered_map<uint64_t, Request*> by_transfer;
  for (const ScheduledSequence& s : batch.seqs) {
    Request& r = *requests_.at(s.seq->id);
    if (r.kv_transfer_id != 0) by_transfer.emplace(r.kv_transfer_id, &r);
  }
  int64_t sent = 0;
  for (const KvLayerSender::PlannedBlock& b : kv_layer_sender_->planned()) {
    Request& r = *by_transfer.at(b.transfer_id);
    const auto at = static_cast<size_t>(b.block_index);
    if (at >= r.seq.block_hashes.size() || r.seq.block_hashes[at] != b.hash) {
      KILN_LOG_ERROR("KV transfer {:#x}: block {} went under a hash the scheduler did not file it under",
                     b.transfer_id, b.block_index);
      continue;
    }
    r.kv_blocks_sent = std::max(r.kv_blocks_sent, b.block_index + 1);
    ++sent;
  }
  return sent;
}

EngineCounters LLMEngine::Counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

Expected<std::vector<GenerationResult>> LLMEngine::Generate(std::vector<GenerationRequest> requests) {
  // Shared with the callbacks, so that a request left behind by an error
  // never writes into a dead frame.
  struct State {
    std::vector<GenerationResult> results;
    size_t remaining = 0;
  };
  auto state = std::make_shared<State>();
  state->results.resize(requests.size());
  state->remaining = requests.size();
  for (size_t i = 0; i < requests.size(); ++i) {
    auto ids = PromptIds(requests[i]);
    if (!ids.ok()) return ids.status().WithContext(fmt::format("request {}", i));
    state->results[i].prompt_ids = *ids;
  }
  std::vector<RequestId> added;
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest& request = requests[i];
    request.prompt_ids = state->results[i].prompt_ids;
    TokenCallback user = std::move(request.on_token);
    const bool want_logprobs = request.params.logprobs || request.params.top_logprobs > 0;
    request.on_token = [state, i, user, want_logprobs](const TokenEvent& event) {
      GenerationResult& result = state->results[i];
      if (event.token >= 0) {
        result.output_ids.push_back(event.token);
        if (want_logprobs) result.logprobs.push_back(event.logprob);
      }
      result.text += event.text;
      if (event.finished) {
        result.stats = *event.stats;
        state->remaining -= 1;
      }
      if (user) user(event);
    };
    auto id = AddRequest(std::move(request));
    if (!id.ok()) {
      for (RequestId a : added) Abort(a);
      return id.status().WithContext(fmt::format("request {}", i));
    }
    state->results[i].id = *id;
    added.push_back(*id);
  }
  while (state->remaining > 0) {
    Status s = Step();
    if (!s.ok()) {
      for (RequestId a : added) Abort(a);
      return s;
    }
  }
  return std::move(state->results);
}

}  // namespace kiln
