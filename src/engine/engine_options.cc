// Engine option checks and the --kv-cache-memory syntax.
#include "engine/engine_options.h"

#include <optional>

#include "core/byte_size.h"

namespace kiln {

Expected<KvCacheMemory> ParseKvCacheMemory(std::string_view text) {
  Expected<ByteSize> size = ParseByteSize(text);
  if (!size.ok()) return InvalidArgument("KV cache memory '{}': {}", text, size.status().message());
  if (!(size->number > 0)) {
    return InvalidArgument(
        "KV cache memory '{}': expected a size such as 512MiB or 2G, or a fraction such as 0.2", text);
  }
  KvCacheMemory m;
  if (!size->has_unit && size->number <= 1) {
    m.fraction = size->number;
    return m;
  }
  if (size->bytes < 1) return InvalidArgument("KV cache memory '{}': size out of range", text);
  m.bytes = size->bytes;
  return m;
}

Expected<DType> ParseDraftDType(std::string_view name) {
  std::optional<DType> dtype = DTypeFromName(name);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16 &&
                 *dtype != DType::kQ8_0 && *dtype != DType::kQ4_0)) {
    return InvalidArgument("draft dtype '{}': expected f32, f16, bf16, q8_0 or q4_0", name);
  }
  return *dtype;
}

Status EngineOptions::Validate() const {
  if (tensor_parallel_size < 1 || pipeline_parallel_size < 1) {
    return InvalidArgument("--tensor-parallel-size {} and --pipeline-parallel-size {} must be at least 1",
                           tensor_parallel_size, pipeline_parallel_size);
  }
  if (pipeline_parallel_size > 1 && !calibration.empty()) {
    return Unsupported("--calibration with --pipeline-parallel-size {}: calibrate without the split and pass the "
                       "clips with --w8a8-clips", pipeline_parallel_size);
  }
  if (pipeline_parallel_size > 1 && spec_method == "draft") {
    return Unsupported("--spec-method draft with --pipeline-parallel-size {}: a draft model is not split over ranks",
                       pipeline_parallel_size);
  }
  if (!(collective_timeout_seconds > 0)) {
    return InvalidArgument("--collective-timeout {} is not a positive number of seconds", collective_timeout_seconds);
  }
  if (tensor_parallel_size > 1 && !calibration.empty()) {
    return Unsupported("--calibration with --tensor-parallel-size {}: calibrate without the split and pass the "
                       "clips with --w8a8-clips", tensor_parallel_size);
  }
  if (tensor_parallel_size > 1 && spec_method == "draft") {
    return Unsupported("--spec-method draft with --tensor-parallel-size {}: a draft model is not split over ranks",
                       tensor_parallel_size);
  }
  if (!w8a8 && (!calibration.empty() || !w8a8_clips.empty())) {
    return InvalidArgument("--calibration and --w8a8-clips need --w8a8");
  }
  if (!(calibration_percentile > 0 && calibration_percentile <= 100)) {
    return InvalidArgument("calibration percentile {} is not in (0, 100]", calibration_percentile);
  }
  if (load_format != "auto" && load_format != "dummy") {
    return InvalidArgument("load format '{}': expected auto or dummy", load_format);
  }
  if (load_format == "dummy" && model.empty() && preset.empty()) {
    return InvalidArgument("load format dummy needs a preset (--preset) or a model folder with config.json");
  }
  if (load_format != "dummy" && model.empty()) return InvalidArgument("no model given");
  if (block_size < 1 || block_size > 1024) {
    return InvalidArgument("block size must be in [1, 1024], got {}", block_size);
  }
  if (max_num_seqs < 1) return InvalidArgument("max-num-seqs must be >= 1, got {}", max_num_seqs);
  // Every running sequence must be able to decode in every step (this
  // also keeps the batch limit positive; its range is the compiler's to
  // check).
  if (max_num_batched_tokens < max_num_seqs) {
    return InvalidArgument("max-num-batched-tokens ({}) must be at least max-num-seqs ({})",
                           max_num_batched_tokens, max_num_seqs);
  }
  if (max_prefill_chunk < 0) {
    return InvalidArgument("max-prefill-chunk must be >= 0, got {}", max_prefill_chunk);
  }
  if (spec_method != "none" && spec_method != "ngram" && spec_method != "draft") {
    return InvalidArgument("spec method '{}': expected none, ngram or draft", spec_method);
  }
  if (spec_method == "draft" && draft_model.empty()) {
    return InvalidArgument("spec method draft needs a draft model (--draft-model PATH, or self)");
  }
  if (spec_method != "draft" && !draft_model.empty()) {
    return InvalidArgument("--draft-model needs --spec-method draft (spec method is '{}')", spec_method);
  }
  if (!draft_dtype.empty()) {
    if (draft_model != "self") {
      return InvalidArgument(
          "--draft-dtype needs --draft-model self (a draft model file keeps its own dtypes)");
    }
    if (!ParseDraftDType(draft_dtype).ok()) {
      return InvalidArgument("draft dtype '{}': expected f32, f16, bf16, q8_0 or q4_0", draft_dtype);
    }
  }
  if (spec_tokens < 1 || spec_tokens > 64) {
    return InvalidArgument("spec-tokens must be in [1, 64], got {}", spec_tokens);
  }
  if (spec_max_batch < 0) return InvalidArgument("spec-max-batch must be >= 0, got {}", spec_max_batch);
  if (spec_ngram_min < 1 || spec_ngram_max < spec_ngram_min) {
    return InvalidArgument("spec-ngram-min ({}) must be >= 1 and at most spec-ngram-max ({})", spec_ngram_min,
                           spec_ngram_max);
  }
  if (max_model_len < 0) return InvalidArgument("max-model-len must be >= 0, got {}", max_model_len);
  if (kv_cache_memory.bytes < 0 || kv_cache_memory.fraction < 0 || kv_cache_memory.fraction > 1) {
    return InvalidArgument("KV cache memory must be a positive size or a fraction in (0, 1]");
  }
  if (kv_cache_dtype != DType::kF32 && kv_cache_dtype != DType::kF16 && kv_cache_dtype != DType::kBF16 &&
      kv_cache_dtype != DType::kI8) {
    return InvalidArgument("KV cache dtype {}: expected f32, f16, bf16 or int8", DTypeName(kv_cache_dtype));
  }
  return Status::Ok();
}

}  // namespace kiln
