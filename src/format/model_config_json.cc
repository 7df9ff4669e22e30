// ModelConfig <-> JSON.
#include "format/model_config_json.h"

#include <nlohmann/json.hpp>

namespace kiln {
namespace {

// The enums by their position; names would be nicer to read but the
// artifact is versioned as a whole, so positions are stable within a version.
template <typename E>
int AsInt(E e) {
  return static_cast<int>(e);
}

template <typename E>
Expected<E> EnumAt(const nlohmann::json& j, const char* key, int count) {
  const int v = j.at(key).get<int>();
  if (v < 0 || v >= count) return Corrupt("model config: '{}' = {} is out of range", key, v);
  return static_cast<E>(v);
}

}  // namespace

nlohmann::json ModelConfigToJson(const ModelConfig& c) {
  nlohmann::json r = {
      {"type", AsInt(c.rope_scaling.type)},
      {"factor", c.rope_scaling.factor},
      {"low_freq_factor", c.rope_scaling.low_freq_factor},
      {"high_freq_factor", c.rope_scaling.high_freq_factor},
      {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings},
      {"beta_fast", c.rope_scaling.beta_fast},
      {"beta_slow", c.rope_scaling.beta_slow},
      {"attention_factor", c.rope_scaling.attention_factor},
      {"short_factor", c.rope_scaling.short_factor},
      {"long_factor", c.rope_scaling.long_factor},
  };
  return {
      {"arch", AsInt(c.arch)},
      {"arch_name", ArchitectureName(c.arch)},
      {"hf_architecture", c.hf_architecture},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rotary_dim", c.rotary_dim},
      {"rope_style", AsInt(c.rope_style)},
      {"rope_scaling", r},
      {"activation", AsInt(c.activation)},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", c.attention_bias},
      {"attention_output_bias", c.attention_output_bias},
      {"qk_norm", c.qk_norm},
      {"sliding_window", c.sliding_window},
      {"sliding_layers", c.sliding_layers},
      {"rope_local_theta", c.rope_local_theta},
      {"gemma_norms", c.gemma_norms},
      {"query_pre_attn_scalar", c.query_pre_attn_scalar},
      {"attn_logit_softcap", c.attn_logit_softcap},
      {"final_logit_softcap", c.final_logit_softcap},
      {"bos_token_ids", c.bos_token_ids},
      {"eos_token_ids", c.eos_token_ids},
      {"torch_dtype", c.torch_dtype},
      {"num_experts", c.num_experts},
      {"experts_per_token", c.experts_per_token},
      {"expert_intermediate_size", c.expert_intermediate_size},
      {"normalize_expert_weights", c.normalize_expert_weights},
      {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
      {"dense_mlp_layers", c.dense_mlp_layers},
  };
}

Expected<ModelConfig> ModelConfigFromJson(const nlohmann::json& j) {
  ModelConfig c;
  try {
    KILN_ASSIGN_OR_RETURN(c.arch, EnumAt<Architecture>(j, "arch", AsInt(Architecture::kQwen3Moe) + 1));
    c.hf_architecture = j.at("hf_architecture").get<std::string>();
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    c.hidden_size = j.at("hidden_size").get<int64_t>();
    c.intermediate_size = j.at("intermediate_size").get<int64_t>();
    c.num_layers = j.at("num_layers").get<int64_t>();
    c.num_heads = j.at("num_heads").get<int64_t>();
    c.num_kv_heads = j.at("num_kv_heads").get<int64_t>();
    c.head_dim = j.at("head_dim").get<int64_t>();
    c.max_position_embeddings = j.at("max_position_embeddings").get<int64_t>();
    c.rms_norm_eps = j.at("rms_norm_eps").get<double>();
    c.rope_theta = j.at("rope_theta").get<double>();
    c.rotary_dim = j.at("rotary_dim").get<int64_t>();
    KILN_ASSIGN_OR_RETURN(c.rope_style, EnumAt<RopeStyle>(j, "rope_style", 2));
    const nlohmann::json& r = j.at("rope_scaling");
    KILN_ASSIGN_OR_RETURN(c.rope_scaling.type, EnumAt<RopeScalingType>(r, "type", AsInt(RopeScalingType::kLongRope) + 1));
    c.rope_scaling.factor = r.at("factor").get<double>();
    c.rope_scaling.low_freq_factor = r.at("low_freq_factor").get<double>();
    c.rope_scaling.high_freq_factor = r.at("high_freq_factor").get<double>();
    c.rope_scaling.original_max_position_embeddings = r.at("original_max_position_embeddings").get<int64_t>();
    c.rope_scaling.beta_fast = r.at("beta_fast").get<double>();
    c.rope_scaling.beta_slow = r.at("beta_slow").get<double>();
    c.rope_scaling.attention_factor = r.at("attention_factor").get<double>();
    c.rope_scaling.short_factor = r.at("short_factor").get<std::vector<double>>();
    c.rope_scaling.long_factor = r.at("long_factor").get<std::vector<double>>();
    KILN_ASSIGN_OR_RETURN(c.activation, EnumAt<Activation>(j, "activation", AsInt(Activation::kGeluTanh) + 1));
    c.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
    c.attention_bias = j.at("attention_bias").get<bool>();
    c.attention_output_bias = j.at("attention_output_bias").get<bool>();
    c.qk_norm = j.at("qk_norm").get<bool>();
    c.sliding_window = j.at("sliding_window").get<int64_t>();
    c.sliding_layers = j.at("sliding_layers").get<std::vector<bool>>();
    c.rope_local_theta = j.at("rope_local_theta").get<double>();
    c.gemma_norms = j.at("gemma_norms").get<bool>();
    c.query_pre_attn_scalar = j.at("query_pre_attn_scalar").get<double>();
    c.attn_logit_softcap = j.at("attn_logit_softcap").get<double>();
    c.final_logit_softcap = j.at("final_logit_softcap").get<double>();
    c.bos_token_ids = j.at("bos_token_ids").get<std::vector<int64_t>>();
    c.eos_token_ids = j.at("eos_token_ids").get<std::vector<int64_t>>();
    c.torch_dtype = j.at("torch_dtype").get<std::string>();
    c.num_experts = j.at("num_experts").get<int64_t>();
    c.experts_per_token = j.at("experts_per_token").get<int64_t>();
    c.expert_intermediate_size = j.at("expert_intermediate_size").get<int64_t>();
    c.normalize_expert_weights = j.at("normalize_expert_weights").get<bool>();
    c.shared_expert_intermediate_size = j.at("shared_expert_intermediate_size").get<int64_t>();
    c.dense_mlp_layers = j.at("dense_mlp_layers").get<std::vector<bool>>();
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("model config: {}", e.what());
  }
  KILN_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace kiln
