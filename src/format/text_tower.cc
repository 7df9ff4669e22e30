#include "format/text_tower.h"

#include <string>

namespace kiln {

namespace {

using nlohmann::json;

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// transformers' Gemma3TextConfig defaults: gemma-3-4b-it's text_config, for
// one, gives only hidden_size, intermediate_size, num_hidden_layers,
// rope_scaling and sliding_window.
json Gemma3TextDefaults() {
  return {
      {"architectures", {"Gemma3ForCausalLM"}},
      {"model_type", "gemma3_text"},
      {"vocab_size", 262208},
      {"hidden_size", 2304},
      {"intermediate_size", 9216},
      {"num_hidden_layers", 26},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 1000000.0},
      {"rope_local_base_freq", 10000.0},
      {"query_pre_attn_scalar", 256},
      {"sliding_window", 4096},
      {"sliding_window_pattern", 6},
      {"attention_bias", false},
      {"tie_word_embeddings", true},
  };
}

}  // namespace

const char* TextTowerWrapperOf(const json& config) {
  if (!config.is_object()) return nullptr;
  auto archs = config.find("architectures");
  if (archs != config.end() && archs->is_array() && !archs->empty() && (*archs)[0] == "Gemma3ForConditionalGeneration") {
    return "Gemma3ForConditionalGeneration";
  }
  auto type = config.find("model_type");
  if (archs == config.end() && type != config.end() && *type == "gemma3" && config.contains("text_config")) {
    return "Gemma3ForConditionalGeneration";
  }
  return nullptr;
}

Expected<json> TextTowerConfig(const json& config, const std::string& source) {
  auto text = config.find("text_config");
  if (text == config.end() || !text->is_object()) {
    return InvalidArgument("{}: {} without a text_config object", source,
                           TextTowerWrapperOf(config) != nullptr ? TextTowerWrapperOf(config) : "a multimodal model");
  }
  json merged = Gemma3TextDefaults();
  for (const auto& [key, value] : text->items()) {
    // The tower's own class, whatever the text_config names.
    if (key == "architectures" || key == "model_type") continue;
    merged[key] = value;
  }
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype"}) {
    auto top = config.find(key);
    if (top != config.end() && !merged.contains(key)) merged[key] = *top;
  }
  return merged;
}

std::optional<std::string> TextTowerTensorName(std::string_view name) {
  for (std::string_view prefix : {"language_model.", "model.language_model."}) {
    if (!StartsWith(name, prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    // "language_model.model.layers..." and "language_model.lm_head..." keep
    // their own "model." / "lm_head."; "model.language_model.layers..." lost it.
    if (prefix == "language_model.") return std::string(rest);
    return "model." + std::string(rest);
  }
  if (StartsWith(name, "lm_head.")) return std::string(name);
  return std::nullopt;
}

}  // namespace kiln
