// Engine flags shared by the serving commands.
#include "cli/engine_flags.h"

#include <cstdlib>

#include "cli/backend_plugin_flag.h"
#include "core/dtype.h"
#include "engine/model_artifact.h"
#include "format/artifact_file.h"
#include "quant/quantize_ref.h"
#ifdef KILN_WITH_MPI
#include "parallel/tensor_parallel.h"
#endif

namespace kiln::cli {

Expected<DType> ParseKvCacheDType(const std::string& name) {
  auto dtype = name == "int8" ? std::optional<DType>(DType::kI8) : DTypeFromName(name);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16 && *dtype != DType::kI8)) {
    return InvalidArgument("--kv-cache-dtype {}: expected f32, f16, bf16 or int8", name);
  }
  return *dtype;
}

Expected<Precision> ParsePrecisionFlag(const std::string& flag, Precision fallback) {
  if (flag.empty()) return fallback;
  auto p = ParsePrecision(flag);
  if (!p.ok()) return p.status().WithContext("--precision");
  return *p;
}

void AddEngineFlags(CLI::App* cmd, EngineFlags* flags) {
  EngineOptions& o = flags->options;
  flags->command = cmd;
  const std::string group = "Engine";
  cmd->add_option("-m,--model", o.model, "A Hugging Face folder, a .gguf file or a compiled .kiln artifact")
      ->group(group);
  cmd->add_flag("--verify-weights", o.verify_weights,
                "With a .kiln artifact: check every weight section's checksum at load")
      ->group(group);
  cmd->add_flag("--recompile-if-stale", o.recompile_if_stale,
                "With a .kiln artifact: rebuild it in place from the source it records when it is stale (another "
                "kernel-layout version, an ISA this CPU lacks) instead of refusing it")
      ->group(group);
  cmd->add_option("--load-format", o.load_format,
                  "auto: read the model's weights; dummy: generate weights of its (or --preset's) shapes")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->group(group);
  cmd->add_option("--preset", o.preset,
                  "With --load-format dummy: a published model's shapes, e.g. qwen2.5-0.5b")
      ->group(group);
  cmd->add_option("--dtype", flags->dummy_dtype, "With --load-format dummy: the generated weights' dtype (f32, f16, bf16 or a block type kiln quantize writes: q8_0, q4_0, q5_0, q4_k, iq4_nl, ...)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--tokenizer", o.tokenizer,
                  "A tokenizer other than the model's (a folder, tokenizer.json or .gguf)")
      ->group(group);
  cmd->add_option("--backend", o.backend, "The backend to compile for")->capture_default_str()->group(group);
  AddBackendPluginFlag(cmd, &flags->backend_plugins, group);
  cmd->add_option("--precision", flags->precision,
                  "fp32, mixed or bf16 products (default: mixed; fp32 for ONNX graphs, where mixed and bf16 "
                  "multiply convolutions and matmuls in bf16 where the CPU does so natively)")
      ->group(group);
  cmd->add_option("--threads", o.threads,
                  "Compute threads (0: one per physical core; under mpirun, the host's cores shared among its ranks)")
      ->group(group);
  const std::string parallel = "Model parallelism (under mpirun)";
  cmd->add_option("--tensor-parallel-size", o.tensor_parallel_size,
                  "Split the attention heads and MLP over this many processes started by mpirun -np N")
      ->check(CLI::PositiveNumber)
      ->group(parallel);
  cmd->add_option("--pipeline-parallel-size", o.pipeline_parallel_size,
                  "Split the decoder layers into this many stages, one per process started by mpirun -np N "
                  "(tensor parallel size x this)")
      ->check(CLI::PositiveNumber)
      ->group(parallel);
  cmd->add_option("--collective-timeout", o.collective_timeout_seconds,
                  "Seconds a rank waits on the others at start-up, within a forward pass and before exiting; past it, it "
                  "fails the running requests and exits non-zero")
      ->capture_default_str()
      ->group(parallel);
  cmd->add_flag("--w8a8", o.w8a8,
                "Run the decoder layers' linears in int8: weights per channel, activations per token (VNNI "
                "where the CPU has it)")
      ->group(group);
  cmd->add_option("--calibration", o.calibration,
                  "With --w8a8: a text file to calibrate static activation scales on")
      ->group(group);
  cmd->add_option("--calibration-percentile", o.calibration_percentile,
                  "With --calibration: the percentile of per-token maxima that becomes each input's clip")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--w8a8-clips", o.w8a8_clips,
                  "With --w8a8: a JSON file of activation clips, written after --calibration, else read")
      ->group(group);
  cmd->add_option(
         "--kv-cache-memory", flags->kv_cache_memory,
         "KV cache size: bytes (512MiB, 2G) or a fraction of available memory (0.2); default: enough "
         "for max-num-seqs full-length sequences, at most a fifth of available memory")
      ->group(group);
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                  "f32, f16, bf16 or int8 (int8: a float scale per token and KV head)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--block-size", o.block_size, "Tokens per KV cache block")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--max-num-seqs", o.max_num_seqs, "Sequences batched together at most")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Tokens in one forward pass at most")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--max-prefill-chunk", o.max_prefill_chunk,
                  "Prompt tokens of one sequence per pass at most (0: max-num-batched-tokens)")
      ->group(group);
  cmd->add_option("--max-model-len", o.max_model_len, "Context length (0: the model's)")->group(group);
  cmd->add_flag("--enable-prefix-caching,!--no-prefix-caching", o.enable_prefix_caching,
                "Reuse the KV cache of shared prompt prefixes (on by default)")
      ->group(group);
  cmd->add_option("--kv-window-free", o.kv_window_free,
                  "Sliding-window layers (Gemma 2/3) keep their KV blocks in a pool of their own and free the "
                  "blocks that fall out of their window (true by default)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--spec-method", o.spec_method,
                  "Speculative decoding: none, ngram (draft tokens looked up in the prompt and output) or "
                  "draft (a smaller model with the same tokenizer, --draft-model); greedy output stays exactly "
                  "the same, sampled output keeps its distribution")
      ->check(CLI::IsMember({"none", "ngram", "draft"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--spec-tokens", o.spec_tokens, "Draft tokens verified per sequence and pass at most")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--spec-adaptive,!--no-spec-adaptive", o.spec_adaptive,
                "Each sequence's draft length follows its recent acceptance, pausing where drafts are rarely "
                "right (on by default)")
      ->group(group);
  cmd->add_flag("--spec-measure-costs,!--no-spec-measure-costs", o.spec_measure_costs,
                "Weigh draft lengths against the measured costs of a verified row and a draft token (one "
                "decode step in 64 goes without drafts to time a plain pass); off: fixed guesses (on by "
                "default)")
      ->group(group);
  cmd->add_option("--spec-max-batch", o.spec_max_batch,
                  "Steps with more decoding sequences than this verify no drafts (0: no limit)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--spec-ngram-min", o.spec_ngram_min,
                  "With --spec-method ngram: the shortest suffix matched")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--spec-ngram-max", o.spec_ngram_max,
                  "With --spec-method ngram: the longest suffix matched (tried first)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--draft-model", o.draft_model,
                  "With --spec-method draft: the draft model (a Hugging Face folder or .gguf file with the "
                  "model's tokenizer), or self (the model's own weights, see --draft-dtype); its KV cache "
                  "comes out of --kv-cache-memory")
      ->group(group);
  cmd->add_option("--draft-dtype", o.draft_dtype,
                  "With --draft-model self: the draft's weights converted at load time to f32, f16, bf16, "
                  "q8_0 or q4_0")
      ->group(group);
}

Expected<EngineOptions> EngineFlags::Resolve() const {
  EngineOptions o = options;
  KILN_RETURN_IF_ERROR(LoadBackendPlugins(backend_plugins));
  auto dummy = DTypeFromName(dummy_dtype);
  if (!dummy || !CanQuantizeTo(*dummy)) {
    return InvalidArgument("--dtype {}: expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, "
                           "iq4_nl or iq4_xs",
                           dummy_dtype);
  }
  o.dummy_dtype = *dummy;
  KILN_ASSIGN_OR_RETURN(o.precision, ParsePrecisionFlag(precision, Precision::kMixed));
  KILN_ASSIGN_OR_RETURN(o.kv_cache_dtype, ParseKvCacheDType(kv_cache_dtype));
  if (!kv_cache_memory.empty()) {
    auto memory = ParseKvCacheMemory(kv_cache_memory);
    if (!memory.ok()) return memory.status().WithContext("--kv-cache-memory");
    o.kv_cache_memory = *memory;
  }
  if (!o.model.empty() && IsArtifactFile(o.model)) {
    for (const char* flag : {"--load-format", "--preset"}) {
      if (command != nullptr && command->count(flag) > 0) {
        return InvalidArgument("{}: {} is a compiled artifact, which holds its weights", flag, o.model);
      }
    }
    KILN_ASSIGN_OR_RETURN(OpenedArtifact artifact, OpenArtifact(o.model, o.recompile_if_stale));
    std::set<std::string> given;
    for (const std::string& flag : ArtifactCompileFlags()) {
      if (command != nullptr && command->count(flag) > 0) given.insert(flag);
    }
    KILN_RETURN_IF_ERROR(ApplyArtifactOptions(artifact.metadata, command != nullptr ? &given : nullptr, &o));
    o.opened_artifact = std::make_shared<const OpenedArtifact>(std::move(artifact));
  }
  KILN_RETURN_IF_ERROR(o.Validate());
  if (o.tensor_parallel_size > 1 || o.pipeline_parallel_size > 1) {
#ifdef KILN_WITH_MPI
    KILN_ASSIGN_OR_RETURN(TensorParallelStart start, StartTensorParallel(&o));
    // A rank other than 0 has followed rank 0's passes to the end: its
    // command is done.
    if (!start.runs_engine) std::exit(start.exit_code);
#else
    return Unsupported("--tensor-parallel-size {} x --pipeline-parallel-size {}: this kiln was built without MPI "
                       "(install libopenmpi-dev and rebuild)", o.tensor_parallel_size, o.pipeline_parallel_size);
#endif
  }
  return o;
}

}  // namespace kiln::cli
