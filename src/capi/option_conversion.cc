// Reading the C API's options structs.
#include "capi/option_conversion.h"

#include "capi/c_boundary.h"
#include "core/dtype.h"

namespace kiln::capi {
namespace {

// Generous bounds so that a garbage count is an error, not an allocation.
constexpr size_t kMaxStopStrings = 1024;
constexpr size_t kMaxStopTokenIds = 1 << 16;
constexpr size_t kMaxPromptIds = size_t{1} << 24;

std::string OrDefault(const char* text, const char* fallback) {
  return text != nullptr ? text : fallback;
}

// The KV cache element type. Engines also take "int8" (a scale per token
// and head); sessions read their cache directly and keep to float types.
Expected<DType> KvDType(const char* name, const char* field, bool allow_int8) {
  const std::string text = OrDefault(name, "f32");
  if (allow_int8 && text == "int8") return DType::kI8;
  auto dtype = DTypeFromName(text);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16)) {
    return InvalidArgument("{} '{}': expected {}", field, text,
                           allow_int8 ? "f32, f16, bf16 or int8" : "f32, f16 or bf16");
  }
  return *dtype;
}

Expected<Precision> PrecisionOption(const char* name, const char* field) {
  auto precision = ParsePrecision(OrDefault(name, "mixed"));
  if (!precision.ok()) return precision.status().WithContext(field);
  return *precision;
}

}  // namespace

kiln_model_options DefaultCModelOptions() {
  kiln_model_options o{};
  o.struct_size = sizeof(o);
  return o;
}

kiln_engine_options DefaultCEngineOptions() {
  const EngineOptions e;
  kiln_engine_options o{};
  o.struct_size = sizeof(o);
  o.threads = e.threads;
  o.block_size = e.block_size;
  o.enable_prefix_caching = e.enable_prefix_caching ? 1 : 0;
  o.max_num_seqs = e.max_num_seqs;
  o.max_num_batched_tokens = e.max_num_batched_tokens;
  o.max_prefill_chunk = e.max_prefill_chunk;
  o.max_model_len = e.max_model_len;
  o.seed = e.seed;
  o.spec_tokens = e.spec_tokens;
  o.spec_ngram_min = e.spec_ngram_min;
  o.spec_ngram_max = e.spec_ngram_max;
  return o;
}

kiln_session_options DefaultCSessionOptions() {
  const ModelSessionOptions s;
  kiln_session_options o{};
  o.struct_size = sizeof(o);
  o.threads = s.threads;
  o.max_batch_tokens = static_cast<int32_t>(s.max_batch_tokens);
  o.block_size = static_cast<int32_t>(s.block_size);
  return o;
}

kiln_request DefaultCRequest() {
  kiln_request r{};
  r.struct_size = sizeof(r);
  r.add_special_tokens = 1;
  return r;
}

kiln_sampling_params ToCSamplingParams(const SamplingParams& p) {
  kiln_sampling_params c{};
  c.struct_size = sizeof(c);
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.min_p = p.min_p;
  c.repetition_penalty = p.repetition_penalty;
  c.presence_penalty = p.presence_penalty;
  c.frequency_penalty = p.frequency_penalty;
  c.seed = p.seed ? static_cast<int64_t>(*p.seed & 0x7fffffffffffffffull) : -1;
  c.max_tokens = p.max_tokens;
  c.min_tokens = p.min_tokens;
  c.ignore_eos = p.ignore_eos ? 1 : 0;
  c.skip_special_tokens = p.skip_special_tokens ? 1 : 0;
  c.logprobs = p.logprobs ? 1 : 0;
  c.json_object = p.json_object ? 1 : 0;  // grammar and json_schema stay NULL: no storage to point into
  return c;
}

Expected<SamplingParams> FromCSamplingParams(const kiln_sampling_params* given) {
  KILN_ASSIGN_OR_RETURN(kiln_sampling_params c,
                        ReadOptions(given, ToCSamplingParams(SamplingParams{}), "params"));
  SamplingParams p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repetition_penalty = c.repetition_penalty;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  if (c.seed >= 0) p.seed = static_cast<uint64_t>(c.seed);
  p.max_tokens = c.max_tokens;
  p.min_tokens = c.min_tokens;
  p.ignore_eos = c.ignore_eos != 0;
  p.skip_special_tokens = c.skip_special_tokens != 0;
  p.logprobs = c.logprobs != 0;
  if (c.grammar != nullptr) p.grammar = c.grammar;
  if (c.json_schema != nullptr) p.json_schema = c.json_schema;
  p.json_object = c.json_object != 0;
  if (c.num_stop > kMaxStopStrings) {
    return InvalidArgument("params.num_stop is {}, more than {}", c.num_stop, kMaxStopStrings);
  }
  if (c.num_stop > 0 && c.stop == nullptr)
    return InvalidArgument("params.stop is NULL but num_stop is {}", c.num_stop);
  for (size_t i = 0; i < c.num_stop; ++i) {
    if (c.stop[i] == nullptr) return InvalidArgument("params.stop[{}] is NULL", i);
    p.stop.emplace_back(c.stop[i]);
  }
  if (c.num_stop_token_ids > kMaxStopTokenIds) {
    return InvalidArgument("params.num_stop_token_ids is {}, more than {}", c.num_stop_token_ids,
                           kMaxStopTokenIds);
  }
  if (c.num_stop_token_ids > 0 && c.stop_token_ids == nullptr) {
    return InvalidArgument("params.stop_token_ids is NULL but num_stop_token_ids is {}",
                           c.num_stop_token_ids);
  }
  p.stop_token_ids.assign(c.stop_token_ids, c.stop_token_ids + c.num_stop_token_ids);
  Status valid = p.Validate();
  if (!valid.ok()) return valid.WithContext("params");
  return p;
}

Expected<EngineOptions> FromCModelOptions(const char* path, const kiln_model_options* given) {
  KILN_ASSIGN_OR_RETURN(kiln_model_options c, ReadOptions(given, DefaultCModelOptions(), "options"));
  EngineOptions o;
  o.load_format = OrDefault(c.load_format, "auto");
  if (path == nullptr && o.load_format != "dummy") return InvalidArgument("path is NULL");
  o.model = OrDefault(path, "");
  o.tokenizer = OrDefault(c.tokenizer, "");
  o.preset = OrDefault(c.preset, "");
  const std::string dtype_name = OrDefault(c.dummy_dtype, "bf16");
  auto dtype = DTypeFromName(dtype_name);
  if (!dtype || (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16)) {
    return InvalidArgument("options.dummy_dtype '{}': expected f32, f16 or bf16", dtype_name);
  }
  o.dummy_dtype = *dtype;
  o.dummy_seed = c.dummy_seed;
  if (o.load_format != "auto" && o.load_format != "dummy") {
    return InvalidArgument("options.load_format '{}': expected auto or dummy", o.load_format);
  }
  return o;
}

Expected<EngineOptions> FromCEngineOptions(const kiln_engine_options* given) {
  KILN_ASSIGN_OR_RETURN(kiln_engine_options c, ReadOptions(given, DefaultCEngineOptions(), "options"));
  EngineOptions o;
  if (c.threads < 0)
    return InvalidArgument("options.threads must be >= 0 (0: one per physical core), got {}", c.threads);
  o.threads = c.threads;
  if (c.kv_cache_memory_bytes < 0) {
    return InvalidArgument("options.kv_cache_memory_bytes must be >= 0, got {}", c.kv_cache_memory_bytes);
  }
  if (!(c.kv_cache_memory_fraction >= 0 && c.kv_cache_memory_fraction <= 1)) {
    return InvalidArgument("options.kv_cache_memory_fraction must be in [0, 1], got {}",
                           c.kv_cache_memory_fraction);
  }
  o.kv_cache_memory.bytes = c.kv_cache_memory_bytes;
  o.kv_cache_memory.fraction = c.kv_cache_memory_fraction;
  KILN_ASSIGN_OR_RETURN(o.kv_cache_dtype,
                        KvDType(c.kv_cache_dtype, "options.kv_cache_dtype", /*allow_int8=*/true));
  o.block_size = c.block_size;
  o.enable_prefix_caching = c.enable_prefix_caching != 0;
  o.max_num_seqs = c.max_num_seqs;
  o.max_num_batched_tokens = c.max_num_batched_tokens;
  o.max_prefill_chunk = c.max_prefill_chunk;
  o.max_model_len = c.max_model_len;
  KILN_ASSIGN_OR_RETURN(o.precision, PrecisionOption(c.precision, "options.precision"));
  o.backend = OrDefault(c.backend, "cpu");
  o.seed = c.seed;
  o.spec_method = OrDefault(c.spec_method, "none");
  o.spec_tokens = c.spec_tokens;
  o.spec_ngram_min = c.spec_ngram_min;
  o.spec_ngram_max = c.spec_ngram_max;
  o.draft_model = OrDefault(c.draft_model, "");
  o.draft_dtype = OrDefault(c.draft_dtype, "");
  return o;
}

Expected<ModelSessionOptions> FromCSessionOptions(int32_t max_seqs, int32_t max_tokens_per_seq,
                                                  const kiln_session_options* given) {
  KILN_ASSIGN_OR_RETURN(kiln_session_options c, ReadOptions(given, DefaultCSessionOptions(), "options"));
  ModelSessionOptions o;
  o.max_seqs = max_seqs;
  o.kv_tokens_per_seq = max_tokens_per_seq;
  o.threads = c.threads;
  o.max_batch_tokens = c.max_batch_tokens;
  o.block_size = c.block_size;
  KILN_ASSIGN_OR_RETURN(o.precision, PrecisionOption(c.precision, "options.precision"));
  KILN_ASSIGN_OR_RETURN(o.kv_dtype,
                        KvDType(c.kv_cache_dtype, "options.kv_cache_dtype", /*allow_int8=*/false));
  o.backend = OrDefault(c.backend, "cpu");
  return o;
}

Expected<GenerationRequest> FromCRequest(const kiln_request& c) {
  GenerationRequest r;
  if (c.num_prompt_ids > 0) {
    if (c.prompt_ids == nullptr)
      return InvalidArgument("request.prompt_ids is NULL but num_prompt_ids is {}", c.num_prompt_ids);
    if (c.num_prompt_ids > kMaxPromptIds) {
      return InvalidArgument("request.num_prompt_ids is {}, more than {}", c.num_prompt_ids, kMaxPromptIds);
    }
    r.prompt_ids.assign(c.prompt_ids, c.prompt_ids + c.num_prompt_ids);
  } else if (c.prompt == nullptr) {
    return InvalidArgument("request.prompt is NULL and there are no prompt_ids");
  } else {
    r.prompt = c.prompt;
  }
  r.add_special_tokens = c.add_special_tokens != 0;
  KILN_ASSIGN_OR_RETURN(r.params, FromCSamplingParams(c.params));
  return r;
}

kiln_finish_reason ToCFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return KILN_FINISH_NONE;
    case FinishReason::kStop: return KILN_FINISH_STOP;
    case FinishReason::kLength: return KILN_FINISH_LENGTH;
    case FinishReason::kAbort: return KILN_FINISH_ABORT;
    case FinishReason::kError: return KILN_FINISH_ERROR;
  }
  return KILN_FINISH_ERROR;
}

}  // namespace kiln::capi
