// Published configurations of the models kiln is benchmarked on, as their
// config.json files state them.
#include "format/presets.h"

namespace kiln {
namespace {

ModelConfig Qwen2Base() {
  ModelConfig c;
  c.arch = Architecture::kQwen2;
  c.hf_architecture = "Qwen2ForCausalLM";
  c.vocab_size = 151936;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151643};
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig Qwen25_05B() {
  ModelConfig c = Qwen2Base();
  c.hidden_size = 896;
  c.intermediate_size = 4864;
  c.num_layers = 24;
  c.num_heads = 14;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 32768;
  return c;
}

ModelConfig Qwen25_15B() {
  ModelConfig c = Qwen2Base();
  c.hidden_size = 1536;
  c.intermediate_size = 8960;
  c.num_layers = 28;
  c.num_heads = 12;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.max_position_embeddings = 131072;
  return c;
}

ModelConfig Qwen3_06B() {
  ModelConfig c;
  c.arch = Architecture::kQwen3;
  c.hf_architecture = "Qwen3ForCausalLM";
  c.vocab_size = 151936;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.num_layers = 28;
  c.num_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 128;  // explicit in config.json: not hidden_size / num_heads
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  c.qk_norm = true;
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151645};
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig Llama32_1B() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.hf_architecture = "LlamaForCausalLM";
  c.vocab_size = 128256;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling.type = RopeScalingType::kLlama3;
  c.rope_scaling.factor = 32.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 8192;
  c.tie_word_embeddings = true;
  c.bos_token_ids = {128000};
  c.eos_token_ids = {128001};
  c.torch_dtype = "bfloat16";
  return c;
}

// Llama-3-8B (the original release: 8K context, no RoPE scaling).
ModelConfig Llama3_8B() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.hf_architecture = "LlamaForCausalLM";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.tie_word_embeddings = false;
  c.bos_token_ids = {128000};
  c.eos_token_ids = {128001};
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig Phi4Mini() {
  ModelConfig c;
  c.arch = Architecture::kPhi3;
  c.hf_architecture = "Phi3ForCausalLM";
  c.vocab_size = 200064;
  c.hidden_size = 3072;
  c.intermediate_size = 8192;
  c.num_layers = 32;
  c.num_heads = 24;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rotary_dim = 96;  // partial_rotary_factor 0.75
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope_scaling.type = RopeScalingType::kLongRope;
  c.rope_scaling.original_max_position_embeddings = 4096;
  c.rope_scaling.factor = 131072.0 / 4096.0;
  c.rope_scaling.short_factor.assign(48, 1.0);
  c.rope_scaling.long_factor = {
      1,           1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897,  1.956131817, 2.187582649,
      2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023, 4.785517845, 5.351743533,
      5.984965424, 6.693110555, 7.485043894, 8.370679318, 9.36110372,  10.4687158,  11.70738129, 13.09260651,
      14.64173252, 16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03,
      32.1,        32.13,       32.23,       32.6,        32.61,       32.64,       32.66,       32.7,
      32.71,       32.93,       32.97,       33.28,       33.49,       33.5,        44.16,       47.77};
  c.sliding_window = 262144;
  c.tie_word_embeddings = true;
  c.bos_token_ids = {199999};
  c.eos_token_ids = {199999};
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig Gemma3_1B() {
  ModelConfig c;
  c.arch = Architecture::kGemma3;
  c.hf_architecture = "Gemma3ForCausalLM";
  c.vocab_size = 262144;
  c.hidden_size = 1152;
  c.intermediate_size = 6912;
  c.num_layers = 26;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.rope_local_theta = 10000.0;
  c.activation = Activation::kGeluTanh;
  c.tie_word_embeddings = true;
  c.qk_norm = true;
  c.gemma_norms = true;
  c.query_pre_attn_scalar = 256;
  c.sliding_window = 512;
  for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0);
  c.bos_token_ids = {2};
  c.eos_token_ids = {1, 106};
  c.torch_dtype = "bfloat16";
  return c;
}

ModelConfig Qwen3_30B_A3B() {
  ModelConfig c;
  c.arch = Architecture::kQwen3Moe;
  c.hf_architecture = "Qwen3MoeForCausalLM";
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;  // no dense layers: unused
  c.num_layers = 48;
  c.num_heads = 32;
  c.num_kv_heads = 4;
  c.head_dim = 128;
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.qk_norm = true;
  c.num_experts = 128;
  c.experts_per_token = 8;
  c.expert_intermediate_size = 768;
  c.normalize_expert_weights = true;
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151645};
  c.torch_dtype = "bfloat16";
  return c;
}

// Qwen3-30B-A3B's widths, experts and routing in 6 of its 48 layers: its
// decoding's per-layer costs in 2 GB at Q4_0, loaded in seconds.
ModelConfig Qwen3MoeSmall() {
  ModelConfig c = Qwen3_30B_A3B();
  c.num_layers = 6;
  return c;
}

ModelConfig Mixtral8x7B() {
  ModelConfig c;
  c.arch = Architecture::kMixtral;
  c.hf_architecture = "MixtralForCausalLM";
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1000000.0;
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.expert_intermediate_size = 14336;
  c.normalize_expert_weights = true;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  c.torch_dtype = "bfloat16";
  return c;
}

struct Preset {
  const char* name;
  ModelConfig (*make)();
};
constexpr Preset kPresets[] = {
    {"qwen2.5-0.5b", Qwen25_05B},
    {"qwen2.5-1.5b", Qwen25_15B},
    {"qwen3-0.6b", Qwen3_06B},
    {"llama-3.2-1b", Llama32_1B},
    {"llama-3-8b", Llama3_8B},
    {"phi-4-mini", Phi4Mini},
    {"gemma-3-1b", Gemma3_1B},
    {"qwen3-30b-a3b", Qwen3_30B_A3B},
    {"qwen3-moe-small", Qwen3MoeSmall},
    {"mixtral-8x7b", Mixtral8x7B},
};

}  // namespace

Expected<ModelConfig> PresetConfig(std::string_view name) {
  for (const auto& p : kPresets) {
    if (name == p.name) return p.make();
  }
  return NotFound("no model preset '{}'; presets: {}", name, fmt::join(PresetNames(), ", "));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

}  // namespace kiln
