// Everything that shapes an engine at start-up: which model, how it is
// compiled, how big the KV cache is and how the scheduler batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/precision.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

class Collective;
struct OpenedArtifact;
class ModelSession;
struct BoundValue;
struct ForwardBatch;
// As compiler/program.h declares it.
using DumpFn = std::function<void(const std::string& name, const BoundValue& value, int64_t rows)>;

// The KV cache's size: a number of bytes, or a fraction of the memory
// available when the engine starts, or (neither set) enough for
// max_num_seqs sequences of max_model_len tokens within a fifth of
// available memory.
struct KvCacheMemory {
  int64_t bytes = 0;
  double fraction = 0;
};

// Parses "512MiB", "2G", "1.5GB", "1073741824" (bytes) or "0.2" (a
// fraction, any plain number in (0, 1]). Sizes are written as
// ParseByteSize (core/byte_size.h) reads them.
Expected<KvCacheMemory> ParseKvCacheMemory(std::string_view text);

// Past this many decoding sequences a step verifies no drafts. Measured on
// a 2-core CPU (bench/RESULTS.md): at 4 a pass over 5 tokens per sequence
// already cost about 3x a pass over one and n-gram speculation about broke
// even; from 8 on it decoded slower than plain decoding.
inline constexpr int32_t kDefaultSpecMaxBatch = 4;

struct EngineOptions {
  // The model: a Hugging Face folder or a .gguf file; with load_format
  // "dummy", generated weights of `preset`'s shapes (or of the folder's
  // config.json) in `dummy_dtype`.
  std::string model;
  std::string load_format = "auto";  // "auto" or "dummy"
  std::string preset;
  DType dummy_dtype = DType::kBF16;
  uint64_t dummy_seed = 0;
  std::string tokenizer;  // a tokenizer path other than the model's
  // A compiled artifact (model_artifact.h): check every weight section's
  // checksum at load (the header, plan and metadata are always checked).
  bool verify_weights = false;
  // A stale artifact (another kernel-layout version, an ISA this CPU
  // lacks) is rebuilt from the source it records, in place, instead of
  // being refused.
  bool recompile_if_stale = false;

  // Compilation.
  std::string backend = "cpu";
  Precision precision = Precision::kMixed;
  int threads = 0;  // 0: one per physical core
  // W8A8 on the CPU: the decoder layers' linears in int8, activations scaled
  // per token, or by static clips calibrated on a text file (the clips file
  // is written after calibration, else read).
  bool w8a8 = false;
  std::string calibration;
  double calibration_percentile = 99.9;
  std::string w8a8_clips;

  // KV cache.
  KvCacheMemory kv_cache_memory;
  DType kv_cache_dtype = DType::kF32;
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  // Models with both sliding-window and full-attention layers (Gemma 2/3):
  // the sliding layers' keys and values in a pool of their own, whose
  // blocks a sequence gives back once they fall out of the window (see
  // docs). Only where the engine runs the model alone on the CPU backend:
  // tensor and pipeline parallelism, KV transfers and a draft model keep
  // one table per sequence.
  bool kv_window_free = true;

  // Scheduling.
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_prefill_chunk = 0;  // 0: max_num_batched_tokens
  int32_t max_model_len = 0;      // 0: the model's own limit

  // Speculative decoding: "none", "ngram" (prompt lookup: the latest
  // spec_ngram_max to spec_ngram_min tokens found earlier in the sequence
  // propose what followed them) or "draft" (a smaller model with the same
  // tokenizer, draft_model, runs ahead). Up to spec_tokens draft tokens per
  // sequence are checked in the pass that decodes its next token; greedy
  // output stays exactly what it is without, sampled output keeps its
  // distribution (rejection sampling), and a grammar applies to every
  // verified token. With spec_adaptive each sequence's draft length follows
  // its recent acceptance (draft_length.h), weighed against what drafting
  // costs: measured as it runs with spec_measure_costs (one decode step in
  // 64 then goes without drafts to time a plain pass: spec_cost_meter.h),
  // else fixed guesses, which keep draft lengths a function of acceptance
  // alone. Steps with more than spec_max_batch decoding sequences do not
  // speculate (0: no limit).
  std::string spec_method = "none";
  int32_t spec_tokens = 4;
  bool spec_adaptive = true;
  bool spec_measure_costs = true;
  int32_t spec_max_batch = kDefaultSpecMaxBatch;
  int32_t spec_ngram_min = 2;
  int32_t spec_ngram_max = 4;
  // With spec_method "draft": a Hugging Face folder or .gguf file, or
  // "self" (the model's own weights, converted to draft_dtype when set; the
  // draft shares the tokenizer and nothing else). The draft's KV cache is
  // carved out of kv_cache_memory.
  std::string draft_model;
  std::string draft_dtype;  // with "self": f32, f16, bf16, q8_0 or q4_0; empty: as loaded

  // Seeds requests that set none; 0 draws one from the system at start-up.
  uint64_t seed = 0;
  // When set, every forward pass writes its named values here (see
  // tensor_dump.h).
  std::string dump_dir;

  // Model parallelism across processes (src/parallel starts the group):
  // the weights split over tensor_parallel_size ranks, this process being
  // collective->rank(); every rank's all-reduces give up after
  // collective_timeout_seconds. Rank 0 runs the engine, and before_forward
  // hands each pass's batch (with the session's shape: its batch limits and
  // KV blocks, which the others match) to the other ranks, which run it on
  // their shard.
  // Pipeline parallelism: the decoder layers split into
  // pipeline_parallel_size contiguous stages, rank r holding stage r
  // (WeightStore::PipelineStage); rank 0 sends the batch as above, runs the
  // first stage, and pipeline_run_pass moves the hidden states from stage
  // to stage and brings the last stage's logits back. Both together: T x P
  // ranks, each stage split over T of them (collective is then the stage's
  // tensor-parallel group, and pipeline_stage says which stage this process
  // runs; -1: its rank in collective, which has P ranks).
  int32_t tensor_parallel_size = 1;
  int32_t pipeline_parallel_size = 1;
  int32_t pipeline_stage = -1;
  double collective_timeout_seconds = 60;
  std::shared_ptr<Collective> collective;
  // `model` as a compiled artifact already opened and checked by whoever
  // applied its options (the command line), so that loading does not open
  // and check it again; used only while it is the file `model` names.
  std::shared_ptr<const OpenedArtifact> opened_artifact;
  std::function<Status(const ForwardBatch&, const ModelSession&)> before_forward;
  std::function<Status(const ForwardBatch&, ModelSession&, float* logits, int64_t logits_stride,
                       const DumpFn* dump)>
      pipeline_run_pass;

  // Checks ranges and combinations; the message names the option.
  Status Validate() const;
};

// The dtype of a "self" draft (EngineOptions::draft_dtype): f32, f16, bf16,
// q8_0 or q4_0.
Expected<DType> ParseDraftDType(std::string_view name);

}  // namespace kiln
