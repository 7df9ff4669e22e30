// Compiling a model: the four stages in order, then the Programs.
#include "compiler/compiled_model.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "compiler/bind.h"
#include "compiler/compilation_codec.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "format/weight_store.h"
#include "models/decoder_builder.h"

namespace kiln {

CompiledModel::~CompiledModel() = default;

const ModelConfig& CompiledModel::config() const {
  return weights_->config();
}

KvCacheLayout CompiledModel::MakeKvLayout(int64_t num_blocks, int64_t window_num_blocks) const {
  KvCacheLayout l;
  l.num_layers = config().StageLayerCount();  // a pipeline stage caches its own layers
  l.num_blocks = num_blocks;
  l.block_size = options_.block_size;
  l.num_kv_heads = config().num_kv_heads;
  l.head_dim = config().head_dim;
  l.dtype = options_.kv_dtype;
  if (window_num_blocks > 0) {
    l.window_num_blocks = window_num_blocks;
    for (int64_t i = 0; i < l.num_layers; ++i) {
      l.window_layers.push_back(config().LayerSlides(config().StageLayerBegin() + i) ? 1 : 0);
    }
  }
  return l;
}

bool CompiledModel::CanUseWindowPool() const {
  const KvCacheLayout l = MakeKvLayout(1, 1);
  return l.NumWindowLayers() > 0 && l.NumWindowLayers() < l.num_layers;
}

Expected<std::unique_ptr<KvCache>> CompiledModel::AllocateKvCache(int64_t num_blocks,
                                                                  int64_t window_num_blocks) const {
  if (num_blocks < 1) return InvalidArgument("a KV cache of {} blocks", num_blocks);
  if (window_num_blocks < 0) return InvalidArgument("a KV window pool of {} blocks", window_num_blocks);
  if (window_num_blocks > 0 && !CanUseWindowPool()) {
    return InvalidArgument("a KV window pool needs both sliding-window and full-attention layers");
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                        KvCache::Allocate(MakeKvLayout(num_blocks, window_num_blocks), *kv_cache_domain_));
  // 4 KiB pages on the CPU: 11 ms less to the first token of a 24-layer
  // model, and decoding at an 8,000-token context measured no slower
  // (bench/RESULTS.md).
  if (kv_cache_domain_ == &BackendRegistry::Get().cpu().domain()) cache->AdviseSmallPages();
  return cache;
}

std::string CompilationKey(const ModelConfig& config, const CompileOptions& o, int64_t max_model_len) {
  // The ISA too: what the stages decide may depend on the kernels a CPU
  // has, so a file compiled for a lower ISA than this one's (which runs)
  // compiles again rather than binding those decisions.
  return fmt::format(
      "backend={} precision={} tokens={} len={} seqs={} block={} kv={} fuse={}{}{} w8a8={} collective={} "
      "tp={} "
      "stage={}/{} isa={}",
      o.backend, PrecisionName(o.precision), o.max_batch_tokens, max_model_len, o.max_seqs, o.block_size,
      DTypeName(o.kv_dtype), int{o.fuse.fuse_linears}, int{o.fuse.fuse_gate_up_act},
      int{o.fuse.fuse_add_norm}, int{o.w8a8.enabled}, int{o.collective != nullptr},
      config.tensor_parallel_size, config.pipeline_stage, config.pipeline_stages, GetCpuInfo().BestIsa());
}

namespace {

// The compilation `weights` stores (a compiled artifact's), when it was
// made under `key`; nullopt when there is none, it was made with other
// options or by another version of its format, or KILN_ARTIFACT_PLANS=
// recompile asks for the stages to run anyway (to measure what storing
// them saves on one file).
Expected<std::optional<StoredCompilation>> StoredFor(const WeightStore& weights, const std::string& key,
                                                     const std::map<int32_t, std::string>& domain_names) {
  const char* plans_env = std::getenv("KILN_ARTIFACT_PLANS");
  if (weights.stored_compilation().empty() ||
      (plans_env != nullptr && std::string_view(plans_env) == "recompile")) {
    return std::optional<StoredCompilation>();
  }
  auto stored_key = CompilationKeyOf(weights.stored_compilation());
  if (!stored_key.ok()) {
    if (stored_key.status().code() == StatusCode::kUnsupported) return std::optional<StoredCompilation>();
    return stored_key.status().WithContext(weights.path());
  }
  if (*stored_key != key) return std::optional<StoredCompilation>();
  std::map<std::string, int32_t> domain_ids;
  for (const auto& [id, name] : domain_names) domain_ids[name] = id;
  auto decoded = DecodeCompilation(weights.stored_compilation(), weights, domain_ids);
  if (!decoded.ok()) return decoded.status().WithContext(weights.path());
  return std::optional<StoredCompilation>(std::move(decoded).value());
}

}  // namespace

Expected<std::unique_ptr<CompiledModel>> CompiledModel::Compile(const WeightStore& weights,
                                                                const CompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto m = std::unique_ptr<CompiledModel>(new CompiledModel());
  m->weights_ = &weights;
  m->options_ = options;
  const ModelConfig& config = weights.config();
  m->max_model_len_ = options.max_model_len > 0 ? options.max_model_len : config.max_position_embeddings;
  if (m->max_model_len_ <= 0)
    return InvalidArgument("model has no max_position_embeddings; pass a max model length");
  if (options.max_batch_tokens < 1 || options.max_batch_tokens > kMaxBatchTokensLimit) {
    return InvalidArgument("max_batch_tokens must be in [1, {}], got {}", kMaxBatchTokensLimit,
                           options.max_batch_tokens);
  }
  if (options.kv_dtype != DType::kF32 && options.kv_dtype != DType::kF16 &&
      options.kv_dtype != DType::kBF16 && options.kv_dtype != DType::kI8) {
    return Unsupported("KV cache dtype {}: expected f32, f16, bf16 or i8 (int8)",
                       DTypeName(options.kv_dtype));
  }

  BackendRegistry& backends = BackendRegistry::Get();
  Backend* target = backends.Find(options.backend);
  if (target == nullptr) {
    return NotFound(
        "backend '{}': available backends are {} (others load as plugins: --backend-plugin PATH "
        "or KILN_BACKEND_PATH)",
        options.backend, backends.Names());
  }
  CompileReport& report = m->report_;
  report.backend = target->name();
  report.precision = options.precision;
  for (Backend* b : backends.All()) report.domain_names[b->domain().id()] = b->domain().name();

  // A compiled artifact holds the graph after the stages and the plan of
  // every bucket: when it was compiled with these options, nothing is
  // planned again; only the packed weights are adopted and the Programs bound.
  const std::string key = CompilationKey(config, options, m->max_model_len_);
  KILN_ASSIGN_OR_RETURN(std::optional<StoredCompilation> stored,
                        StoredFor(weights, key, report.domain_names));
  Graph& g = m->graph_;
  std::optional<Graph> unpacked;  // the graph as stored: before packing points nodes at fp32 copies
  std::vector<MemoryPlan> plans;
  if (stored) {
    g = std::move(stored->graph);
    plans = std::move(stored->plans);
    report.legalize = std::move(stored->report.legalize);
    report.fuse = std::move(stored->report.fuse);
    report.layout = std::move(stored->report.layout);
    report.input_shapes = std::move(stored->report.input_shapes);
    report.from_artifact = true;
  } else {
    KILN_ASSIGN_OR_RETURN(g, BuildDecoderGraph(weights));
    // Stage 1: legalize, pricing fallbacks per decoded token.
    ShapeEnv cost_env{1, 1, m->max_model_len_, m->max_model_len_};
    KILN_RETURN_IF_ERROR(Legalize(g, *target, backends.cpu(), cost_env, &report.legalize));
    // Stage 3 (before memory planning, which must see the fused graph):
    // fuse and precision.
    FuseOptions fuse = options.fuse;
    fuse.precision = options.precision;
    KILN_RETURN_IF_ERROR(Fuse(g, backends, fuse, &report.fuse));
    // Stage 2: domains, transfers, packing; the arena per bucket below.
    KILN_RETURN_IF_ERROR(AssignDomainsAndTransfers(g, backends, &report.layout));
    if (options.keep_compilation) unpacked = g;
  }
  // The KV cache lives where layout placed it: with the kernel that reads it.
  Backend* kv_owner = report.layout.kv_cache_backend.empty() ? &backends.cpu()
                                                             : backends.Find(report.layout.kv_cache_backend);
  if (kv_owner == nullptr)
    return Internal("KV cache placed on unknown backend '{}'", report.layout.kv_cache_backend);
  m->kv_cache_domain_ = &kv_owner->domain();
  KILN_RETURN_IF_ERROR(PackWeights(g, backends, options.w8a8, &m->packed_, &report.layout, &weights));

  // Buckets: powers of two up to the largest batch.
  std::vector<ShapeEnv> envs;
  for (int64_t t = 1;; t *= 2) {
    ShapeEnv env;
    env.tokens = std::min(t, options.max_batch_tokens);
    env.output_rows = env.tokens;
    env.context_rows = std::min(env.tokens, options.max_seqs) * m->max_model_len_;
    env.score_rows = env.tokens * m->max_model_len_;
    envs.push_back(env);
    if (t >= options.max_batch_tokens) break;
  }
  std::vector<std::vector<size_t>> scratch;
  for (const ShapeEnv& env : envs) scratch.push_back(ScratchNeeds(g, backends, env));
  if (stored) {
    // The stored plans must be these buckets, with room for what the
    // kernels bound here ask for.
    bool same = plans.size() == envs.size();
    for (size_t i = 0; same && i < envs.size(); ++i) {
      const ShapeEnv& a = plans[i].env;
      same = a.tokens == envs[i].tokens && a.output_rows == envs[i].output_rows &&
             a.context_rows == envs[i].context_rows && a.score_rows == envs[i].score_rows;
    }
    if (!same)
      return Corrupt("{}: the compiled graph's buckets are not those of its options", weights.path());
    KILN_RETURN_IF_ERROR(CheckStoredScratch(g, plans, scratch).WithContext(weights.path()));
  } else {
    for (size_t i = 0; i < envs.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(g, envs[i], scratch[i]));
      plans.push_back(std::move(plan));
    }
  }
  for (const MemoryPlan& plan : plans) {
    for (auto& [d, bytes] : plan.arena_bytes) report.arena_bytes[d] = std::max(report.arena_bytes[d], bytes);
  }

  // One arena per domain, shared by all buckets: one pass runs at a time.
  KILN_ASSIGN_OR_RETURN(m->arena_bases_, AllocateArenas(report.arena_bytes, backends, &m->arenas_));

  // Stage 4: bind. The smallest bucket (decoding) now, so that a model
  // that cannot be bound fails to load; the others at their first pass,
  // which a start-up to the first token would otherwise wait for (half a
  // millisecond each on a 0.5B model). Every node is one step.
  for (const MemoryPlan& plan : plans) {
    report.buckets.push_back({plan.env, plan.arena_bytes, plan.naive_bytes, g.nodes().size()});
  }
  m->programs_.resize(plans.size());
  m->plans_ = std::move(plans);
  KILN_RETURN_IF_ERROR(m->BindBucket(0));
  if (unpacked) {
    StoredCompilation keep;
    keep.key = key;
    keep.graph = std::move(*unpacked);
    keep.plans = m->plans_;
    keep.report = report;
    KILN_ASSIGN_OR_RETURN(m->stored_compilation_, EncodeCompilation(keep, weights));
  }

  m->pool_ = options.pool ? options.pool : std::make_shared<ThreadPool>(options.threads);
  // Per-pass metadata, sized once so that Forward allocates nothing.
  m->slots_.resize(static_cast<size_t>(options.max_batch_tokens));
  m->window_slots_.resize(static_cast<size_t>(options.max_batch_tokens));
  m->block_table_lens_.resize(static_cast<size_t>(options.max_batch_tokens));
  m->context_offsets_.resize(static_cast<size_t>(options.max_batch_tokens) + 1);
  m->score_offsets_.resize(static_cast<size_t>(options.max_batch_tokens) + 1);
  report.threads = m->pool_->num_threads();
  report.isa = GetCpuInfo().BestIsa();
  report.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

Status CompiledModel::BindBucketsUpTo(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < plans_.size() && plans_[i].env.tokens <= tokens; ++i) {
    if (programs_[i] == nullptr) KILN_RETURN_IF_ERROR(BindBucket(i));
  }
  return Status::Ok();
}

Status CompiledModel::BindBucket(size_t i) {
  BindInputs in;
  in.graph = &graph_;
  in.plan = &plans_[i];
  in.arena_base = arena_bases_;
  in.packed = &packed_;
  in.backends = &BackendRegistry::Get();
  in.kv_layout = MakeKvLayout(1);
  in.max_positions = max_model_len_;
  KILN_ASSIGN_OR_RETURN(programs_[i], BindProgram(in));
  return Status::Ok();
}

Status CompiledModel::Validate(const ForwardBatch& b, const KvCache& kv, int64_t* context_rows,
                               int64_t* score_rows) const {
  const ModelConfig& c = config();
  if (b.num_tokens <= 0) return InvalidArgument("forward: empty batch");
  if (b.num_tokens > options_.max_batch_tokens) {
    return OutOfRange("forward: {} tokens beyond the largest batch of {}", b.num_tokens,
                      options_.max_batch_tokens);
  }
  if (b.num_seqs <= 0 || b.num_seqs > b.num_tokens) {
    return InvalidArgument("forward: {} sequences for {} tokens", b.num_seqs, b.num_tokens);
  }
  if (b.num_output_rows < 0 || b.num_output_rows > b.num_tokens) {
    return InvalidArgument("forward: {} output rows for {} tokens", b.num_output_rows, b.num_tokens);
  }
  const KvCacheLayout& kl = kv.layout();
  if (kl.num_layers != c.StageLayerCount() || kl.num_kv_heads != c.num_kv_heads ||
      kl.head_dim != c.head_dim || kl.block_size != options_.block_size || kl.dtype != options_.kv_dtype) {
    return InvalidArgument("forward: KV cache layout does not match the compiled model");
  }
  if (kl.HasWindowPool() && b.window_block_tables == nullptr) {
    return InvalidArgument("forward: the KV cache has a window pool but the batch no window block tables");
  }
  if (!kl.HasWindowPool() && b.window_block_tables != nullptr) {
    return InvalidArgument("forward: window block tables for a KV cache without a window pool");
  }
  if (b.query_start[0] != 0 || b.query_start[b.num_seqs] != b.num_tokens) {
    return InvalidArgument("forward: query_start must run from 0 to num_tokens");
  }
  *context_rows = 0;
  *score_rows = 0;
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    int32_t begin = b.query_start[s], end = b.query_start[s + 1];
    if (end <= begin) return InvalidArgument("forward: sequence {} has no tokens", s);
    int64_t len = b.seq_lens[s];
    if (len <= 0 || len > max_model_len_) {
      return OutOfRange("forward: sequence {} length {} beyond the context of {}", s, len, max_model_len_);
    }
    int64_t blocks = (len + kl.block_size - 1) / kl.block_size;
    for (int64_t i = 0; i < blocks; ++i) {
      int32_t id = b.block_tables[s][i];
      if (id < 0 || id >= kl.num_blocks) {
        return OutOfRange("forward: sequence {} block {} is {}, outside the pool of {}", s, i, id,
                          kl.num_blocks);
      }
    }
    if (b.window_block_tables != nullptr) {
      // Entries the batch's first query may see, and every later one, must
      // be blocks of the window pool; earlier ones may be released (-1).
      const int64_t first_visible = std::max<int64_t>(0, b.positions[begin] - c.sliding_window + 1);
      for (int64_t i = 0; i < blocks; ++i) {
        int32_t id = b.window_block_tables[s][i];
        if (id == -1 && i < first_visible / kl.block_size) continue;
        if (id < 0 || id >= kl.window_num_blocks) {
          return OutOfRange("forward: sequence {} window block {} is {}, outside the window pool of {}", s, i,
                            id, kl.window_num_blocks);
        }
      }
    }
    int32_t prev = -1;
    for (int32_t t = begin; t < end; ++t) {
      if (b.token_seq[t] != s) return InvalidArgument("forward: token {} is not in sequence {}", t, s);
      int32_t p = b.positions[t];
      if (p < 0 || p >= len || p <= prev) {
        return InvalidArgument("forward: token {} position {} not increasing within [0, {})", t, p, len);
      }
      prev = p;
      if (b.token_ids[t] < 0 || b.token_ids[t] >= c.vocab_size) {
        return OutOfRange("forward: token id {} outside the vocabulary of {}", b.token_ids[t], c.vocab_size);
      }
    }
    *context_rows += len;
    *score_rows += static_cast<int64_t>(end - begin) * len;
  }
  for (int32_t r = 0; r < b.num_output_rows; ++r) {
    if (b.output_rows[r] < 0 || b.output_rows[r] >= b.num_tokens) {
      return OutOfRange("forward: output row {} is token {}, outside the batch", r, b.output_rows[r]);
    }
  }
  return Status::Ok();
}

Status CompiledModel::Forward(const ForwardBatch& batch, KvCache& kv, float* logits, int64_t logits_stride,
                              const DumpFn* dump, const float* hidden_in) {
  int64_t context_rows = 0, score_rows = 0;
  KILN_RETURN_IF_ERROR(Validate(batch, kv, &context_rows, &score_rows));
  const ModelConfig& c = config();
  if (!c.LastStage()) {
    if (logits == nullptr || logits_stride < c.hidden_size) {
      return InvalidArgument(
          "forward: pipeline stage {}: hidden state buffer missing or rows narrower than {}",
          c.pipeline_stage, c.hidden_size);
    }
  } else if (batch.num_output_rows > 0 && (logits == nullptr || logits_stride < c.vocab_size)) {
    return InvalidArgument("forward: logits buffer missing or rows narrower than the vocabulary");
  }
  if (!c.FirstStage() && hidden_in == nullptr) {
    return InvalidArgument("forward: pipeline stage {} needs the hidden state of the stage before",
                           c.pipeline_stage);
  }
  void* io[1] = {const_cast<float*>(hidden_in)};
  size_t bucket = plans_.size();
  for (size_t i = 0; i < plans_.size(); ++i) {
    const ShapeEnv& cap = plans_[i].env;
    if (cap.tokens >= batch.num_tokens && cap.context_rows >= context_rows && cap.score_rows >= score_rows) {
      bucket = i;
      break;
    }
  }
  if (bucket == plans_.size()) return OutOfRange("forward: the batch fits no compiled bucket");
  std::lock_guard<std::mutex> lock(mu_);
  if (programs_[bucket] == nullptr) KILN_RETURN_IF_ERROR(BindBucket(bucket).WithContext("forward"));
  const Program* program = programs_[bucket].get();
  const int64_t bs = kv.layout().block_size;
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    block_table_lens_[static_cast<size_t>(s)] = static_cast<int32_t>((batch.seq_lens[s] + bs - 1) / bs);
    context_offsets_[static_cast<size_t>(s) + 1] =
        context_offsets_[static_cast<size_t>(s)] + batch.seq_lens[s];
    score_offsets_[static_cast<size_t>(s) + 1] =
        score_offsets_[static_cast<size_t>(s)] +
        static_cast<int64_t>(batch.query_start[s + 1] - batch.query_start[s]) * batch.seq_lens[s];
    for (int32_t t = batch.query_start[s]; t < batch.query_start[s + 1]; ++t) {
      int32_t p = batch.positions[t];
      slots_[static_cast<size_t>(t)] = static_cast<int32_t>(batch.block_tables[s][p / bs] * bs + p % bs);
      if (batch.window_block_tables != nullptr) {
        window_slots_[static_cast<size_t>(t)] =
            static_cast<int32_t>(batch.window_block_tables[s][p / bs] * bs + p % bs);
      }
    }
  }
  RunState state;
  state.slots = slots_.data();
  state.window_slots = batch.window_block_tables != nullptr ? window_slots_.data() : nullptr;
  state.block_table_lens = block_table_lens_.data();
  state.context_offsets = context_offsets_.data();
  state.score_offsets = score_offsets_.data();
  state.batch = &batch;
  state.kv_cache = &kv;
  state.logits = logits;
  state.logits_stride = logits_stride;
  state.pool = pool_.get();
  state.context_rows = context_rows;
  state.score_rows = score_rows;
  // A failed all-reduce (a peer rank that stopped answering) is reported here.
  Status collective_error;
  state.tensor_error = &collective_error;
  state.collective = options_.collective.get();
  if (!c.FirstStage()) state.tensor_io = io;
  KILN_RETURN_IF_ERROR(program->Run(state, dump).WithContext("forward"));
  return collective_error.WithContext("forward");
}

}  // namespace kiln
