// One description of a decoder-only transformer, whether it came from a
// Hugging Face config.json or from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace kiln {

class GgufFile;

enum class Architecture {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kPhi3,
  kGemma2,
  kGemma3,
  kMixtral,
  kQwen2Moe,
  kQwen3Moe,
};

// "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text",
// "mixtral", "qwen2_moe", "qwen3_moe"
const char* ArchitectureName(Architecture a);
// "LlamaForCausalLM, MistralForCausalLM, ..."
std::string SupportedArchitectureList();

// How RoPE pairs the elements of a head: Hugging Face's rotate_half pairs
// (i, i + d/2) ("neox" in ggml); the interleaved convention pairs (2i, 2i+1)
// (ggml's "norm" mode, used for llama-architecture GGUF files, whose q/k
// weights llama.cpp's converter permutes accordingly).
enum class RopeStyle { kHalf, kInterleaved };

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn, kLongRope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  // yarn: 0 derives 0.1 * ln(factor) + 1; longrope: 0 derives
  // sqrt(1 + ln(factor) / ln(original_max_position_embeddings)).
  double attention_factor = 0.0;
  // longrope (Phi-3): per-frequency divisors of the inverse frequencies,
  // rotary_dim / 2 each; the long ones serve a context longer than
  // original_max_position_embeddings, the short ones any other. factor is
  // max_position_embeddings / original_max_position_embeddings.
  std::vector<double> short_factor;
  std::vector<double> long_factor;

  // longrope's factor on cos and sin: attention_factor when given, else
  // derived from factor and original_max_position_embeddings.
  double LongRopeAttentionFactor() const;
};

enum class Activation { kSilu, kGelu, kGeluTanh };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string hf_architecture;  // e.g. "Qwen2ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int64_t rotary_dim = 0;  // the leading elements of each head RoPE rotates; 0: head_dim
  RopeStyle rope_style = RopeStyle::kHalf;
  RopeScaling rope_scaling;
  Activation activation = Activation::kSilu;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2)
  // o_proj has a bias too (Llama's and Qwen3's attention_bias: true).
  bool attention_output_bias = false;
  bool qk_norm = false;         // per-head RMSNorm on q and k (Qwen3)
  int64_t sliding_window = 0;   // 0: full attention
  // Gemma: which layers use sliding_window (the others attend to everything);
  // empty: all of them.
  std::vector<bool> sliding_layers;
  // Gemma 3: the RoPE base of the sliding layers (unscaled); 0: rope_theta.
  double rope_local_theta = 0;
  // Gemma: RMSNorm scales by (1 + w), embeddings are scaled by
  // sqrt(hidden_size), and the attention and MLP outputs are normalized
  // too before their residual adds (post_attention_layernorm then is the
  // attention output's norm; pre_feedforward_layernorm the MLP input's).
  bool gemma_norms = false;
  // Attention scores are scaled by query_pre_attn_scalar^-0.5; 0: head_dim.
  double query_pre_attn_scalar = 0;
  // Gemma 2: scores = cap * tanh(scores / cap) before the softmax, and the
  // same on the logits; 0: none.
  double attn_logit_softcap = 0;
  double final_logit_softcap = 0;
  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): each token's MLP
  // is the weighted sum of the experts_per_token experts a router picks out
  // of num_experts (0: a dense MLP everywhere).
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_intermediate_size = 0;  // each expert's MLP width
  // The chosen experts' softmax probabilities are renormalized to sum to 1
  // (Mixtral, Qwen3-MoE); Qwen2-MoE's released configs keep them as they are.
  bool normalize_expert_weights = true;
  // Qwen2-MoE: an expert every token runs, of this width, scaled by
  // sigmoid(shared_expert_gate(x)); 0: none.
  int64_t shared_expert_intermediate_size = 0;
  // Layers with a dense MLP of intermediate_size among the MoE ones (Qwen's
  // mlp_only_layers and decoder_sparse_step); empty: none.
  std::vector<bool> dense_mlp_layers;
  std::vector<int64_t> bos_token_ids;  // usually one
  std::vector<int64_t> eos_token_ids;  // config.json may list several
  std::string torch_dtype;             // as written in config.json, or ""
  // The language model of a multimodal checkpoint (hf_architecture names the
  // wrapper): its tensors carry the wrapper's prefix, the other towers' are
  // not loaded (format/text_tower.h).
  bool text_tower_of_multimodal = false;
  // Tensor parallelism: this config describes one rank's shard of a model
  // split over this many ranks (WeightStore::TensorParallelShard), its head
  // counts and intermediate_size already divided; the decoder sums the
  // partial outputs of o_proj and down_proj over the ranks.
  int64_t tensor_parallel_size = 1;
  // Pipeline parallelism: this config describes stage pipeline_stage of
  // pipeline_stages (WeightStore::PipelineStage), which holds the decoder
  // layers [stage_first_layer, stage_first_layer + stage_num_layers) (0: all
  // of them) and their KV cache; the first stage takes token ids, the others
  // the hidden state the stage before gave; the last gives logits, the
  // others the hidden state of every token. num_layers stays the model's.
  int64_t pipeline_stage = 0;
  int64_t pipeline_stages = 1;
  int64_t stage_first_layer = 0;
  int64_t stage_num_layers = 0;

  bool FirstStage() const { return pipeline_stage == 0; }
  bool LastStage() const { return pipeline_stage == pipeline_stages - 1; }
  // The layers this config's weights hold: [StageLayerBegin(), StageLayerEnd()).
  int64_t StageLayerBegin() const { return stage_num_layers > 0 ? stage_first_layer : 0; }
  int64_t StageLayerEnd() const { return stage_num_layers > 0 ? stage_first_layer + stage_num_layers : num_layers; }
  int64_t StageLayerCount() const { return StageLayerEnd() - StageLayerBegin(); }

  int64_t RotaryDim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }

  // Whether layer `layer`'s MLP is a mixture of experts.
  bool LayerIsMoe(int64_t layer) const;

  // Parameters implied by the shapes (embedding counted once when tied).
  int64_t ParameterCount() const;
  // Parameters one token computes with: all but the experts it does not
  // choose (ParameterCount() for a dense model).
  int64_t ActiveParameterCount() const;
  // Bytes of K and V for one token across all layers at `bytes_per_element`.
  int64_t KvBytesPerToken(double bytes_per_element) const;

  // Whether layer `layer` attends within sliding_window only.
  bool LayerSlides(int64_t layer) const;
  // The RoPE base of layer `layer` (Gemma 3's sliding layers differ).
  double LayerRopeTheta(int64_t layer) const;
  // Scale of the attention scores.
  double AttentionScale() const;

  // Checks shapes are positive and consistent (heads divisible by KV heads, ...).
  Status Validate() const;
};

// From a parsed config.json; `source` names the file in errors.
Expected<ModelConfig> ModelConfigFromHfJson(const nlohmann::json& j, const std::string& source);
Expected<ModelConfig> ModelConfigFromHfFile(const std::string& config_json_path);
// From GGUF metadata (general.architecture, <arch>.* keys), and Phi-3's
// longrope factors, which GGUF files keep as the tensors named here (long,
// short).
extern const char* const kLongRopeFactorTensors[2];
Expected<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

}  // namespace kiln
