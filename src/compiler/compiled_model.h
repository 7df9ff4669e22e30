// A model compiled for this machine: the four stages run once at load, then
// Forward() runs the Program of the smallest bucket that holds the batch.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"
#include "compiler/fuse.h"
#include "compiler/layout.h"
#include "compiler/legalize.h"
#include "compiler/program.h"
#include "core/status.h"

namespace kiln {

class ThreadPool;
class WeightStore;

// The largest forward pass kiln compiles, in tokens.
inline constexpr int64_t kMaxBatchTokensLimit = int64_t{1} << 16;

struct CompileOptions {
  std::string backend = "cpu";  // the target; what it cannot run falls back to cpu
  Precision precision = Precision::kMixed;
  int64_t max_batch_tokens = 512;  // the largest bucket, in [1, kMaxBatchTokensLimit]
  int64_t max_model_len = 0;       // 0: the model's max_position_embeddings
  int64_t max_seqs = 64;           // sequences per pass (sizes decomposed attention)
  int64_t block_size = 16;         // KV cache block size in tokens
  DType kv_dtype = DType::kF32;
  FuseOptions fuse;
  int threads = 0;  // 0: physical cores
  // The threads the passes run on; null: a pool of `threads` of its own.
  // Models whose passes alternate (a draft model and its target) share
  // one, so that the workers one model just used are the ones spinning
  // when the other's next pass starts, not a second set that competes with
  // them for the cores.
  std::shared_ptr<ThreadPool> pool;
  // W8A8: linears in int8 where a backend runs them so (the CPU: the
  // decoder layers' linears; weights per channel at load, activations per
  // token or by calibrated clips).
  W8A8Options w8a8;
  // Tensor parallelism: the weights are this rank's shard
  // (ModelConfig::tensor_parallel_size) and the all-reduces sum over this
  // group.
  std::shared_ptr<Collective> collective;
  // Keep what an artifact stores of the compilation (stored_compilation()).
  bool keep_compilation = false;
};

struct BucketPlan {
  ShapeEnv env;
  std::map<int32_t, size_t> arena_bytes;
  std::map<int32_t, size_t> naive_bytes;
  size_t steps = 0;
};

struct CompileReport {
  std::string backend;
  Precision precision = Precision::kMixed;
  int threads = 0;
  std::string isa;
  LegalizeReport legalize;
  FuseReport fuse;
  LayoutReport layout;
  std::vector<BucketPlan> buckets;
  // Tensor graphs: "images:1,3,640,640" (the shapes their one Program is for).
  std::string input_shapes;
  std::map<int32_t, size_t> arena_bytes;  // allocated: max over buckets
  std::map<int32_t, std::string> domain_names;
  double compile_seconds = 0;
  // The graph and plans came from a compiled artifact: only bound here.
  bool from_artifact = false;

  // The --plan text: placement per op, fallbacks with cost, fusions,
  // packing and the memory plan.
  std::string ToString(const Graph& g, bool per_node) const;
};

class CompiledModel {
 public:
  // Runs legalize, fuse, layout and bind. `weights` must outlive the model.
  static Expected<std::unique_ptr<CompiledModel>> Compile(const WeightStore& weights, const CompileOptions& options);

  ~CompiledModel();

  const ModelConfig& config() const;
  const WeightStore& weights() const { return *weights_; }
  const Graph& graph() const { return graph_; }
  const CompileReport& report() const { return report_; }
  const CompileOptions& options() const { return options_; }
  // The packed weights every Program shares.
  const PackedWeights& packed() const { return packed_; }
  // The graph, plans and report as an artifact stores them
  // (compiler/compilation_codec.h); empty unless
  // CompileOptions::keep_compilation.
  const std::vector<uint8_t>& stored_compilation() const { return stored_compilation_; }
  int64_t max_batch_tokens() const { return options_.max_batch_tokens; }
  int64_t max_model_len() const { return max_model_len_; }
  ThreadPool& pool() const { return *pool_; }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return pool_; }

  // The KV cache layout this model's Programs expect, for `num_blocks`;
  // with window_num_blocks > 0, the sliding-window layers' pools hold that
  // many blocks of their own (KvCacheLayout's window pool).
  KvCacheLayout MakeKvLayout(int64_t num_blocks, int64_t window_num_blocks = 0) const;
  // Whether the model has both sliding-window and full-attention layers
  // (in this stage), so that a window pool can serve the former.
  bool CanUseWindowPool() const;

  // Where the KV cache lives: the memory domain of the backend whose nodes
  // write and read it (host memory when that is the CPU).
  MemoryDomain& kv_cache_domain() const { return *kv_cache_domain_; }
  // A KV cache of `num_blocks` blocks, laid out as MakeKvLayout says, in
  // kv_cache_domain().
  Expected<std::unique_ptr<KvCache>> AllocateKvCache(int64_t num_blocks, int64_t window_num_blocks = 0) const;

  // One forward pass: writes K/V of the batch's tokens into `kv` and the
  // logits of batch.output_rows into logits (num_output_rows rows of
  // vocab_size floats, logits_stride apart). Validates the batch first;
  // errors (a position beyond the context, a block id outside the pool, too
  // many tokens) change nothing. Not reentrant: one pass at a time.
  // A pipeline stage (ModelConfig's pipeline fields) other than the first
  // reads the hidden state of the batch's tokens from `hidden_in` (rows of
  // hidden_size floats); one other than the last writes every token's
  // hidden state where the logits would go (rows logits_stride apart).
  Status Forward(const ForwardBatch& batch, KvCache& kv, float* logits, int64_t logits_stride,
                 const DumpFn* dump = nullptr, const float* hidden_in = nullptr);

  // Binds now the Programs of every bucket of at most `tokens` tokens that
  // a pass has not bound yet, so that the first passes of those sizes do
  // not wait for it (speculative decoding's small verification and draft
  // passes come in several sizes at once, each otherwise bound in the
  // middle of decoding).
  Status BindBucketsUpTo(int64_t tokens);

 private:
  CompiledModel() = default;
  Status Validate(const ForwardBatch& batch, const KvCache& kv, int64_t* context_rows, int64_t* score_rows) const;
  // Stage 4 for bucket i (plans_[i]) into programs_[i].
  Status BindBucket(size_t i);

  const WeightStore* weights_ = nullptr;
  CompileOptions options_;
  int64_t max_model_len_ = 0;
  MemoryDomain* kv_cache_domain_ = nullptr;
  Graph graph_;
  CompileReport report_;
  PackedWeights packed_;
  std::vector<DomainBuffer> arenas_;
  std::map<int32_t, uint8_t*> arena_bases_;  // by domain
  std::vector<MemoryPlan> plans_;                // ascending capacity
  std::vector<std::unique_ptr<Program>> programs_;  // per plan; null until its first pass
  std::vector<uint8_t> stored_compilation_;
  std::shared_ptr<ThreadPool> pool_;
  std::mutex mu_;  // one pass at a time; guards the per-pass metadata below
  std::vector<int32_t> slots_;
  std::vector<int32_t> window_slots_;  // the window pool's slots (a batch with window_block_tables)
  std::vector<int32_t> block_table_lens_;
  std::vector<int64_t> context_offsets_;  // [0] stays 0
  std::vector<int64_t> score_offsets_;
};

}  // namespace kiln
