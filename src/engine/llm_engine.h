// The serving engine: owns the model session (the compiled model and its
// paged KV cache), the block manager and the scheduler, and runs requests together in continuous
// batches, one forward pass per Step().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/forward_batch.h"
#include "core/status.h"
#include "engine/draft_length.h"
#include "engine/engine_options.h"
#include "engine/generation_config.h"
#include "engine/kv_transfer.h"
#include "engine/model_loader.h"
#include "engine/request.h"

namespace kiln {

class BlockManager;
class CompiledModel;
class DraftProposer;
class GrammarCompiler;
class KvCache;
class KvConnector;
class KvLayerSender;
class KvTransferReceiver;
class ModelRunner;
class ModelSession;
class Scheduler;
struct ScheduledBatch;
class SpecCostMeter;
class TensorDumper;
class Tokenizer;
class WeightStore;
struct ModelConfig;

// Engine-wide figures for metrics, as of the end of the last step.
struct EngineCounters {
  int64_t num_running = 0;
  int64_t num_waiting = 0;  // including requests added since the last step
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  // The window pool of the sliding-window layers (0 total: none): its
  // blocks, those held, and the most any one running sequence holds.
  int64_t kv_window_blocks_total = 0;
  int64_t kv_window_blocks_used = 0;
  int64_t kv_window_blocks_per_seq_max = 0;
  int64_t prefix_cache_queries = 0;    // tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;       // tokens found there
  int64_t prompt_tokens_computed = 0;  // prefill tokens run (recomputation included)
  // Generated tokens fed back and kept in the cache: one per sequence per
  // step, plus the accepted draft tokens of speculative decoding.
  int64_t decode_tokens_computed = 0;
  int64_t generation_tokens = 0;       // tokens sampled
  int64_t num_preemptions = 0;
  // Speculative decoding: passes that verified a draft (one per sequence
  // and step), the draft tokens they checked, and those the model agreed
  // with (each one a token gained without a pass of its own).
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  double spec_draft_seconds = 0;  // proposing drafts (not in prefill or decode seconds)
  // Of spec_draft_seconds, a draft model catching its caches up (not
  // charged to the draft cost).
  double spec_catch_up_seconds = 0;
  // Requests whose drafting a draft model stopped for good, its drafts not
  // paying (draft_length.h).
  int64_t spec_stopped_requests = 0;
  // With spec_measure_costs: the measured extra cost of a verified draft
  // row and of drafting one token, as shares of a plain decode pass (0 until
  // measured; spec_cost_meter.h).
  double spec_row_cost = 0;
  double spec_draft_cost = 0;
  int64_t steps = 0;
  int64_t requests_finished = 0;
  // Time in the steps' forward passes and sampling, each step's split
  // between prefill and decode in proportion to its tokens of each kind
  // (drafts verified are decode tokens).
  double prefill_seconds = 0;
  double decode_seconds = 0;
  // Prefill/decode disaggregation: KV blocks handed to the connector, and
  // (on a decode instance) blocks that landed and were filed in the prefix
  // cache, transfers that ended complete, and those whose blocks were freed
  // after the time-out.
  int64_t kv_blocks_sent = 0;
  int64_t kv_blocks_received = 0;
  // Of those, sent per layer: layer slices handed to the connector during
  // passes, and slices that landed and were taken in (a whole block that
  // lands counts its layers).
  int64_t kv_layer_slices_sent = 0;
  int64_t kv_layer_slices_received = 0;
  int64_t kv_transfers_completed = 0;
  int64_t kv_transfers_expired = 0;
};

// Seconds on the steady clock, the time base of RequestStats.
double EngineClock();

class LLMEngine {
 public:
  // Loads the model named by `options` and builds the engine.
  static Expected<std::unique_ptr<LLMEngine>> Create(const EngineOptions& options);
  // Builds an engine over an already loaded model (several engines may
  // share one). Compiles the model, sizes and allocates the KV cache (a
  // ModelSession).
  static Expected<std::unique_ptr<LLMEngine>> Create(LoadedModel model, const EngineOptions& options);

  ~LLMEngine();
  LLMEngine(const LLMEngine&) = delete;
  LLMEngine& operator=(const LLMEngine&) = delete;

  // Queues a request and returns its id. The prompt is tokenized and the
  // request checked here: an empty prompt, ids outside the vocabulary, bad
  // sampling parameters, a prompt plus max_tokens beyond the context, or a
  // request needing more KV blocks than the whole cache, or a grammar or
  // JSON schema that does not compile ("grammar: ..." / "json_schema: ...")
  // are refused with an error naming the problem. Thread-safe; the request joins at the next
  // Step().
  Expected<RequestId> AddRequest(GenerationRequest request);

  // Ends a request at the next Step(); its callback sees finished with
  // reason abort. Unknown and finished ids are ignored. Thread-safe.
  void Abort(RequestId id);

  // Runs one scheduler step: admits queued requests, applies aborts, runs
  // one forward pass over every scheduled sequence and delivers the sampled
  // tokens to their callbacks. Does nothing when there is no work. An error
  // (a failed forward pass) ends the requests of that pass with reason
  // error; the others continue. Call from one thread at a time.
  Status Step();

  // True while any request is queued, waiting or running. Thread-safe.
  bool HasUnfinishedRequests() const { return num_unfinished_.load() > 0; }

  // Runs `requests` to completion together and returns their results in
  // order; their callbacks are called too. Fails, running nothing, when any
  // request is refused (the message names its index).
  // REQUIRES: no other thread calls Step().
  Expected<std::vector<GenerationResult>> Generate(std::vector<GenerationRequest> requests);

  // The prompt ids a request would run with (its prompt_ids, or its text
  // tokenized). Thread-safe.
  Expected<std::vector<int32_t>> PromptIds(const GenerationRequest& request) const;

  // Thread-safe.
  EngineCounters Counters() const;

  // Prefill/decode disaggregation. What a peer must match for this
  // engine's KV blocks to mean the same there; `model_hash` from
  // ModelIdentityHash.
  KvPeerIdentity KvIdentity(std::string model_hash) const;
  // Gives the engine a KV connector: requests with a kv_transfer_id send
  // their blocks through it, and blocks that land are filed in the prefix
  // cache at the start of each Step(); transfers quiet for
  // `transfer_timeout_seconds` have their blocks freed. Errors when the
  // engine cannot take part (prefix caching off, a cache outside host
  // memory). With `send_per_layer`, a connector that sends per layer
  // (KvConnector::SendsPerLayer) gets each prompt block as layer slices
  // during the pass that completes it, each as soon as its layer is
  // written (in a single-process engine; a model split across processes
  // sends whole blocks after the pass, as every other connector).
  // REQUIRES: called before the first Step().
  Status AttachKvConnector(std::unique_ptr<KvConnector> connector, double transfer_timeout_seconds,
                           bool send_per_layer = true);
  // Whether prompt blocks go out per layer (after AttachKvConnector).
  bool sends_kv_per_layer() const { return kv_layer_sender_ != nullptr; }
  // Null without one.
  KvConnector* kv_connector() const { return kv_connector_.get(); }
  // Transfers with blocks held, waiting for their end or the time-out:
  // while there are some, Step() should run now and then even when idle.
  // Engine thread only.
  bool HasOpenKvTransfers() const;

  const ModelConfig& model_config() const;
  // Null for generated weights without a tokenizer.
  const Tokenizer* tokenizer() const { return model_.tokenizer.get(); }
  const GenerationConfig& generation_config() const { return model_.generation; }
  const EngineOptions& options() const { return options_; }
  const CompiledModel& compiled_model() const;
  // The paged KV cache the passes read and write (to inspect: tests, tools).
  const KvCache& kv_cache() const;
  int64_t max_model_len() const;
  int32_t num_kv_blocks() const;
  // The window pool's blocks (0: none; sliding layers use the full pool).
  int32_t num_window_kv_blocks() const;
  // The ids that end generation unless a request ignores EOS: the
  // tokenizer's, generation_config.json's and config.json's. Sorted.
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }

 private:
  struct Request;

  explicit LLMEngine(LoadedModel model, const EngineOptions& options);
  Status Init();
  // Moves requests and aborts queued by other threads into the scheduler.
  void DrainPending();
  // Files the blocks and transfer ends that landed at the connector, and
  // expires quiet transfers.
  void ReceiveKv();
  // Hands the connector the newly completed prompt blocks of the batch's
  // requests that have a transfer id; returns how many.
  int64_t SendKv(const ScheduledBatch& batch);
  // Per layer: before the pass, plans the prompt blocks of the batch's
  // requests with a transfer id that are full once the pass is done (their
  // hashes computed here as the scheduler will file them); the pass's
  // layer callback sends them. Returns the callback (unset: none planned).
  KvLayerCallback PlanKvLayerSends(const ScheduledBatch& batch);
  // After the pass succeeded: the planned blocks count as sent; returns
  // how many.
  int64_t FinishKvLayerSends(const ScheduledBatch& batch);
  // Sets the drafts of the running sequences that speculate this step
  // (those decoding their next token, unless the batch is past
  // spec_max_batch or the cost meter wants a plain pass timed), each as
  // long as its DraftLength says, and cuts them to what their grammars
  // allow. Adds a draft model's catch-up seconds, and the sequences that
  // stop drafting, to `tally`.
  struct StepTally;
  void ProposeDrafts(StepTally& tally);
  // Sequence `id` has stopped drafting for good: the proposer forgets it
  // and `tally` counts it.
  void StoppedDrafting(RequestId id, StepTally& tally);
  // Appends a sampled token, decides whether the request is done, and
  // tells its callback. False when the request ended (and is gone).
  bool HandleSample(Request& request, const SampleResult& sample, double now);
  // Ends a request: frees its blocks, tells its callback, forgets it.
  void FinishRequest(Request& request, FinishReason reason, TokenEvent event, double now);
  // What one step did, for the counters.
  struct StepTally {
    int64_t prefill_tokens = 0;
    int64_t decode_tokens = 0;  // run, rejected draft tokens included
    int64_t rejected_draft_tokens = 0;
    int64_t verifications = 0;
    int64_t draft_tokens = 0;
    int64_t sampled = 0;
    double seconds = 0;
    double draft_seconds = 0;     // of `seconds`, proposing drafts
    double catch_up_seconds = 0;  // of `draft_seconds`, a draft model catching up
    int64_t stopped_drafting = 0;
    int64_t kv_blocks_sent = 0;
    int64_t kv_layer_slices_sent = 0;
  };
  // Refreshes the gauges (running, waiting, blocks) and adds `step`, when
  // a pass ran, to the totals.
  void UpdateCounters(const StepTally* step);

  LoadedModel model_;
  EngineOptions options_;
  std::unique_ptr<ModelSession> session_;
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<BlockManager> window_blocks_;  // null without a window pool
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<DraftProposer> proposer_;  // null without speculative decoding
  DraftLengthConfig draft_length_;
  // With adaptive draft lengths and spec_measure_costs.
  std::unique_ptr<SpecCostMeter> cost_meter_;
  std::unique_ptr<TensorDumper> dumper_;
  std::unique_ptr<GrammarCompiler> grammars_;  // with a tokenizer only
  std::unique_ptr<KvConnector> kv_connector_;
  std::unique_ptr<KvTransferReceiver> kv_receiver_;  // with kv_connector_
  std::unique_ptr<KvLayerSender> kv_layer_sender_;   // when sending per layer
  std::vector<int32_t> eos_ids_;
  std::unordered_set<int32_t> eos_set_;
  uint64_t seed_base_ = 0;

  // Engine thread only.
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;

  // Shared with other threads.
  mutable std::mutex pending_mu_;
  std::vector<std::unique_ptr<Request>> pending_adds_;
  std::vector<RequestId> pending_aborts_;
  std::atomic<RequestId> next_id_{0};
  std::atomic<int64_t> num_unfinished_{0};
  mutable std::mutex counters_mu_;
  EngineCounters counters_;
};

}  // namespace kiln
