// ModelConfig from Hugging Face config.json and from GGUF metadata, and the
// sizes derived from it.
#include "format/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "format/gguf.h"
#include "format/text_tower.h"

namespace kiln {
namespace {

using nlohmann::json;

struct ArchitectureEntry {
  Architecture arch;
  const char* hf_name;
  const char* model_type;
};
constexpr ArchitectureEntry kArchitectures[] = {
    {Architecture::kLlama, "LlamaForCausalLM", "llama"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kPhi3, "Phi3ForCausalLM", "phi3"},
    {Architecture::kGemma2, "Gemma2ForCausalLM", "gemma2"},
    {Architecture::kGemma3, "Gemma3ForCausalLM", "gemma3_text"},
    {Architecture::kMixtral, "MixtralForCausalLM", "mixtral"},
    {Architecture::kQwen2Moe, "Qwen2MoeForCausalLM", "qwen2_moe"},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe"},
};

// Upper bounds that keep every size derived from a config within int64
// (far above any real model's).
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxHeads = int64_t{1} << 12;
constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
constexpr int64_t kMaxExperts = int64_t{1} << 12;

// ---- config.json field access: absent and null read as "not given" ----

const json* Field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

Expected<std::optional<int64_t>> OptionalInt(const json& j, const char* key, const std::string& source) {
  const json* v = Field(j, key);
  if (v == nullptr) return std::optional<int64_t>();
  if (v->is_number_integer()) return std::optional<int64_t>(v->get<int64_t>());
  // Some writers emit whole numbers as floats ("rope_theta": 10000 vs 1e4).
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
      std::fabs(v->get<double>()) < 9.0e15) {
    return std::optional<int64_t>(static_cast<int64_t>(v->get<double>()));
  }
  return InvalidArgument("{}: {}: expected an integer, got {}", source, key, v->dump());
}

Expected<int64_t> RequiredInt(const json& j, const char* key, const std::string& source) {
  KILN_ASSIGN_OR_RETURN(auto v, OptionalInt(j, key, source));
  if (!v) return InvalidArgument("{}: missing required field '{}'", source, key);
  return *v;
}

Expected<int64_t> IntOr(const json& j, const char* key, int64_t fallback, const std::string& source) {
  KILN_ASSIGN_OR_RETURN(auto v, OptionalInt(j, key, source));
  return v ? *v : fallback;
}

Expected<double> FloatOr(const json& j, const char* key, double fallback, const std::string& source) {
  const json* v = Field(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) return InvalidArgument("{}: {}: expected a number, got {}", source, key, v->dump());
  return v->get<double>();
}

Expected<bool> BoolOr(const json& j, const char* key, bool fallback, const std::string& source) {
  const json* v = Field(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    return InvalidArgument("{}: {}: expected true or false, got {}", source, key, v->dump());
  }
  return v->get<bool>();
}

Expected<std::string> StringOr(const json& j, const char* key, std::string fallback,
                               const std::string& source) {
  const json* v = Field(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return InvalidArgument("{}: {}: expected a string, got {}", source, key, v->dump());
  return v->get<std::string>();
}

// bos_token_id / eos_token_id: an integer, a list of integers, or absent.
Expected<std::vector<int64_t>> TokenIds(const json& j, const char* key, const std::string& source) {
  const json* v = Field(j, key);
  std::vector<int64_t> ids;
  if (v == nullptr) return ids;
  if (v->is_number_integer()) {
    ids.push_back(v->get<int64_t>());
    return ids;
  }
  if (v->is_array()) {
    for (const json& id : *v) {
      if (!id.is_number_integer()) {
        return InvalidArgument("{}: {}: expected integers, got {}", source, key, v->dump());
      }
      ids.push_back(id.get<int64_t>());
    }
    return ids;
  }
  return InvalidArgument("{}: {}: expected an integer or a list of integers, got {}", source, key, v->dump());
}

Expected<Architecture> ArchitectureFromHf(const json& j, const std::string& source, std::string* hf_name) {
  const json* archs = Field(j, "architectures");
  if (archs != nullptr) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return InvalidArgument("{}: architectures: expected a list of names, got {}", source, archs->dump());
    }
    std::string name = (*archs)[0].get<std::string>();
    for (const auto& a : kArchitectures) {
      if (name == a.hf_name) {
        *hf_name = name;
        return a.arch;
      }
    }
    return Unsupported("{}: architecture '{}' is not supported; supported: {}", source, name,
                       SupportedArchitectureList());
  }
  KILN_ASSIGN_OR_RETURN(std::string model_type, StringOr(j, "model_type", "", source));
  for (const auto& a : kArchitectures) {
    if (model_type == a.model_type) {
      *hf_name = a.hf_name;
      return a.arch;
    }
  }
  return Unsupported("{}: no 'architectures' and model_type '{}' is not supported; supported: {}", source,
                     model_type, SupportedArchitectureList());
}

// A list of positive numbers (longrope's factors).
Expected<std::vector<double>> PositiveFloats(const json& j, const char* key, const std::string& source) {
  const json* v = Field(j, key);
  if (v == nullptr) return InvalidArgument("{}: missing required field '{}'", source, key);
  std::vector<double> out;
  if (v->is_array()) {
    for (const json& x : *v) {
      if (!x.is_number() || !(x.get<double>() > 0)) break;
      out.push_back(x.get<double>());
    }
  }
  if (!v->is_array() || out.size() != v->size() || out.empty()) {
    return InvalidArgument("{}: {}: expected a list of positive numbers, got {}", source, key, v->dump());
  }
  return out;
}

// Phi-3's longrope ("su" in older configs). Its configs state the context
// the model was trained at as a top-level original_max_position_embeddings;
// the ratio to max_position_embeddings is the factor, as transformers takes it.
Expected<RopeScaling> LongRopeFromHf(const json& j, const json& v, int64_t max_position,
                                     const std::string& where) {
  RopeScaling rs;
  rs.type = RopeScalingType::kLongRope;
  KILN_ASSIGN_OR_RETURN(rs.short_factor, PositiveFloats(v, "short_factor", where));
  KILN_ASSIGN_OR_RETURN(rs.long_factor, PositiveFloats(v, "long_factor", where));
  KILN_ASSIGN_OR_RETURN(auto original, OptionalInt(j, "original_max_position_embeddings", where));
  if (original) {
    if (*original <= 0) {
      return InvalidArgument("{}: original_max_position_embeddings must be positive", where);
    }
    rs.original_max_position_embeddings = *original;
    rs.factor = static_cast<double>(max_position) / static_cast<double>(*original);
  } else {
    KILN_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          IntOr(v, "original_max_position_embeddings", max_position, where));
    KILN_ASSIGN_OR_RETURN(rs.factor, FloatOr(v, "factor", 1.0, where));
  }
  KILN_ASSIGN_OR_RETURN(rs.attention_factor, FloatOr(v, "attention_factor", 0.0, where));
  return rs;
}

Expected<RopeScaling> RopeScalingFromHf(const json& j, int64_t max_position, const std::string& source) {
  RopeScaling rs;
  const json* v = Field(j, "rope_scaling");
  if (v == nullptr) return rs;
  if (!v->is_object()) {
    return InvalidArgument("{}: rope_scaling: expected an object, got {}", source, v->dump());
  }
  std::string where = source + ": rope_scaling";
  // Newer configs say "rope_type", older ones "type".
  KILN_ASSIGN_OR_RETURN(std::string type, StringOr(*v, "rope_type", "", where));
  if (type.empty()) {
    KILN_ASSIGN_OR_RETURN(type, StringOr(*v, "type", "", where));
  }
  if (type.empty() || type == "default") return rs;
  if (type == "longrope" || type == "su") return LongRopeFromHf(j, *v, max_position, where);
  if (type != "linear" && type != "llama3" && type != "yarn") {
    return Unsupported("{}: type '{}' is not supported (linear, llama3, yarn and longrope are)", where, type);
  }
  KILN_ASSIGN_OR_RETURN(auto factor, FloatOr(*v, "factor", 0.0, where));
  if (!(factor > 0)) return InvalidArgument("{}: {} scaling needs a positive 'factor'", where, type);
  rs.factor = factor;
  if (type == "linear") {
    rs.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::kLlama3;
    KILN_ASSIGN_OR_RETURN(rs.low_freq_factor, FloatOr(*v, "low_freq_factor", 1.0, where));
    KILN_ASSIGN_OR_RETURN(rs.high_freq_factor, FloatOr(*v, "high_freq_factor", 4.0, where));
    KILN_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          RequiredInt(*v, "original_max_position_embeddings", where));
  } else {
    rs.type = RopeScalingType::kYarn;
    KILN_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          IntOr(*v, "original_max_position_embeddings", max_position, where));
    KILN_ASSIGN_OR_RETURN(rs.beta_fast, FloatOr(*v, "beta_fast", 32.0, where));
    KILN_ASSIGN_OR_RETURN(rs.beta_slow, FloatOr(*v, "beta_slow", 1.0, where));
    KILN_ASSIGN_OR_RETURN(rs.attention_factor, FloatOr(*v, "attention_factor", 0.0, where));
  }
  return rs;
}

Expected<Activation> ActivationFromName(const std::string& name, const std::string& source) {
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return Activation::kGeluTanh;
  return Unsupported("{}: hidden_act '{}' is not supported (silu, gelu, gelu_pytorch_tanh are)", source,
                     name);
}

// Gemma 2 and Gemma 3's particulars: (1 + w) norms and the extra ones,
// scaled embeddings, query_pre_attn_scalar, soft-capping, and which layers
// slide (Gemma 2: the even ones; Gemma 3: all but every sixth, or as
// layer_types lists them) with Gemma 3's own RoPE base for those.
Status GemmaFromHf(const json& j, const std::string& source, ModelConfig* out) {
  ModelConfig& c = *out;
  const bool gemma3 = c.arch == Architecture::kGemma3;
  c.gemma_norms = true;
  c.qk_norm = gemma3;
  KILN_ASSIGN_OR_RETURN(c.query_pre_attn_scalar,
                        FloatOr(j, "query_pre_attn_scalar", static_cast<double>(c.head_dim), source));
  KILN_ASSIGN_OR_RETURN(c.attn_logit_softcap, FloatOr(j, "attn_logit_softcapping", 0.0, source));
  KILN_ASSIGN_OR_RETURN(c.final_logit_softcap, FloatOr(j, "final_logit_softcapping", 0.0, source));
  KILN_ASSIGN_OR_RETURN(c.sliding_window, IntOr(j, "sliding_window", 0, source));
  // Gemma always ties the head to the embedding (config.json may not say).
  KILN_ASSIGN_OR_RETURN(c.tie_word_embeddings, BoolOr(j, "tie_word_embeddings", true, source));
  c.sliding_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  if (const json* types = Field(j, "layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers) {
      return InvalidArgument("{}: layer_types: expected a list of {} layer kinds, got {}", source, c.num_layers,
                             types->dump());
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (t == "sliding_attention") {
        c.sliding_layers[i] = true;
      } else if (t != "full_attention") {
        return Unsupported("{}: layer_types[{}]: '{}' (sliding_attention and full_attention are known)", source,
                           i, t.dump());
      }
    }
  } else if (gemma3) {
    KILN_ASSIGN_OR_RETURN(int64_t pattern, IntOr(j, "sliding_window_pattern", 6, source));
    if (pattern <= 0) return InvalidArgument("{}: sliding_window_pattern {} is not positive", source, pattern);
    for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  } else {
    for (int64_t i = 0; i < c.num_layers; i += 2) c.sliding_layers[static_cast<size_t>(i)] = true;
  }
  if (gemma3) {
    KILN_ASSIGN_OR_RETURN(c.rope_local_theta, FloatOr(j, "rope_local_base_freq", 10000.0, source));
  }
  return Status::Ok();
}

// The experts of Mixtral (num_local_experts, every layer, each of
// intermediate_size, weights renormalized), Qwen2-MoE and Qwen3-MoE
// (num_experts of moe_intermediate_size; norm_topk_prob; dense MLPs on the
// layers mlp_only_layers lists and those decoder_sparse_step skips;
// Qwen2-MoE's shared expert).
Status MoeFromHf(const json& j, const std::string& source, ModelConfig* out) {
  ModelConfig& c = *out;
  KILN_ASSIGN_OR_RETURN(c.experts_per_token, RequiredInt(j, "num_experts_per_tok", source));
  if (c.arch == Architecture::kMixtral) {
    KILN_ASSIGN_OR_RETURN(c.num_experts, RequiredInt(j, "num_local_experts", source));
    c.expert_intermediate_size = c.intermediate_size;
    c.normalize_expert_weights = true;
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(c.num_experts, RequiredInt(j, "num_experts", source));
  KILN_ASSIGN_OR_RETURN(c.expert_intermediate_size, RequiredInt(j, "moe_intermediate_size", source));
  KILN_ASSIGN_OR_RETURN(c.normalize_expert_weights,
                        BoolOr(j, "norm_topk_prob", c.arch == Architecture::kQwen3Moe, source));
  if (c.arch == Architecture::kQwen2Moe) {
    KILN_ASSIGN_OR_RETURN(c.shared_expert_intermediate_size,
                          RequiredInt(j, "shared_expert_intermediate_size", source));
  }
  KILN_ASSIGN_OR_RETURN(int64_t step, IntOr(j, "decoder_sparse_step", 1, source));
  if (step <= 0) return InvalidArgument("{}: decoder_sparse_step {} is not positive", source, step);
  if (c.num_layers <= 0 || c.num_layers > kMaxLayers) return Status::Ok();  // Validate says why
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  for (int64_t i = 0; i < c.num_layers; ++i) dense[static_cast<size_t>(i)] = (i + 1) % step != 0;
  if (const json* only = Field(j, "mlp_only_layers")) {
    if (!only->is_array()) {
      return InvalidArgument("{}: mlp_only_layers: expected a list of layer numbers, got {}", source,
                             only->dump());
    }
    for (const json& l : *only) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.num_layers) {
        return InvalidArgument("{}: mlp_only_layers: {} is not a layer number below {}", source, l.dump(),
                               c.num_layers);
      }
      dense[static_cast<size_t>(l.get<int64_t>())] = true;
    }
  }
  if (std::find(dense.begin(), dense.end(), true) != dense.end()) c.dense_mlp_layers = std::move(dense);
  return Status::Ok();
}

// ---- GGUF metadata access ----

class GgufKeys {
 public:
  GgufKeys(const GgufFile& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

  std::string Key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }

  Expected<std::optional<int64_t>> OptionalInt(std::string_view suffix) const { return IntAt(Key(suffix)); }

  Expected<std::optional<int64_t>> IntAt(const std::string& key) const {
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) return std::optional<int64_t>();
    if (v->is_array()) {
      return Unsupported("{}: {}: per-layer values (an array) are not supported", gguf_.path(), key);
    }
    auto i = v->AsInt();
    if (!i || v->type() == GgufType::kBool) {
      return Corrupt("{}: {}: expected an integer, got {}", gguf_.path(), key, GgufTypeName(v->type()));
    }
    return std::optional<int64_t>(*i);
  }

  Expected<int64_t> RequiredInt(std::string_view suffix) const {
    KILN_ASSIGN_OR_RETURN(auto v, OptionalInt(suffix));
    if (!v) return NotFound("{}: missing metadata key '{}'", gguf_.path(), Key(suffix));
    return *v;
  }

  Expected<double> FloatOr(std::string_view suffix, double fallback) const {
    std::string key = Key(suffix);
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) return fallback;
    auto f = v->AsFloat();
    if (!f) return Corrupt("{}: {}: expected a number, got {}", gguf_.path(), key, GgufTypeName(v->type()));
    return *f;
  }

 private:
  const GgufFile& gguf_;
  std::string arch_;
};

// llama.cpp keeps Phi-3's longrope factors as f32 tensors and the context
// the model was trained at as rope.scaling.original_context_length (absent:
// the context length); llama.cpp picks the long factors for a context above
// it, as RopeTable does. Its converter always writes rope.scaling.attn_factor;
// without it llama.cpp scales by 1, not by the factor transformers derives.
Expected<std::vector<double>> FactorTensor(const GgufFile& gguf, const char* name) {
  const GgufTensorInfo* t = gguf.FindTensor(name);
  if (t == nullptr) {
    return NotFound("{}: tensor {} is missing (longrope needs both factor lists)", gguf.path(), name);
  }
  if (t->dtype != DType::kF32 || t->dims.size() != 1 || t->nbytes != static_cast<uint64_t>(t->dims[0]) * 4) {
    return Corrupt("{}: tensor {}: expected a vector of f32", gguf.path(), name);
  }
  std::vector<double> out(static_cast<size_t>(t->dims[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    float f;
    std::memcpy(&f, t->data + 4 * i, 4);
    out[i] = f;
  }
  return out;
}

Expected<RopeScaling> LongRopeFromGguf(const GgufFile& gguf, const GgufKeys& keys, int64_t max_position) {
  RopeScaling rs;
  rs.type = RopeScalingType::kLongRope;
  KILN_ASSIGN_OR_RETURN(rs.long_factor, FactorTensor(gguf, kLongRopeFactorTensors[0]));
  KILN_ASSIGN_OR_RETURN(rs.short_factor, FactorTensor(gguf, kLongRopeFactorTensors[1]));
  KILN_ASSIGN_OR_RETURN(auto original, keys.OptionalInt("rope.scaling.original_context_length"));
  rs.original_max_position_embeddings = original.value_or(max_position);
  if (rs.original_max_position_embeddings <= 0) {
    return Corrupt("{}: {} is not positive", gguf.path(), keys.Key("rope.scaling.original_context_length"));
  }
  rs.factor = static_cast<double>(max_position) / static_cast<double>(rs.original_max_position_embeddings);
  KILN_ASSIGN_OR_RETURN(rs.attention_factor, keys.FloatOr("rope.scaling.attn_factor", 1.0));
  if (!(rs.attention_factor > 0)) {
    return Corrupt("{}: {} is not positive", gguf.path(), keys.Key("rope.scaling.attn_factor"));
  }
  return rs;
}

// Gemma's particulars as llama.cpp writes and reads them: the norms' 1 is
// already added to their weights; the soft caps are keys; Gemma 2's even
// layers slide, Gemma 3's all but every sixth (or as
// attention.sliding_window_pattern says), those at a fixed RoPE base of
// 10000; and the attention scale follows the model size, as in llama.cpp
// (the 27B models scale by hidden_size / heads, the others by head_dim).
Status GemmaFromGguf(const GgufFile& gguf, const GgufKeys& keys, ModelConfig* out) {
  ModelConfig& c = *out;
  const bool gemma3 = c.arch == Architecture::kGemma3;
  c.gemma_norms = true;
  c.qk_norm = gemma3;
  c.activation = Activation::kGeluTanh;
  KILN_ASSIGN_OR_RETURN(c.attn_logit_softcap, keys.FloatOr("attn_logit_softcapping", 0.0));
  KILN_ASSIGN_OR_RETURN(c.final_logit_softcap, keys.FloatOr("final_logit_softcapping", 0.0));
  const bool is_27b = c.num_layers == (gemma3 ? 62 : 46);
  c.query_pre_attn_scalar =
      static_cast<double>(is_27b && c.num_heads > 0 ? c.hidden_size / c.num_heads : c.head_dim);
  if (c.num_layers <= 0 || c.num_layers > kMaxLayers) return Status::Ok();  // Validate says why
  c.sliding_layers.assign(static_cast<size_t>(c.num_layers), false);
  int64_t pattern = gemma3 ? 6 : 2;
  const std::string pattern_key = keys.Key("attention.sliding_window_pattern");
  if (const GgufValue* v = gguf.Find(pattern_key); v != nullptr) {
    if (v->is_array()) {
      // One flag per layer: true where the layer slides.
      if (static_cast<int64_t>(v->items().size()) != c.num_layers) {
        return Corrupt("{}: {}: {} entries for {} layers", gguf.path(), pattern_key, v->items().size(),
                       c.num_layers);
      }
      for (size_t i = 0; i < v->items().size(); ++i) {
        auto slides = v->items()[i].AsBool();
        if (!slides) return Corrupt("{}: {}: expected booleans", gguf.path(), pattern_key);
        c.sliding_layers[i] = *slides;
      }
      pattern = 0;
    } else {
      auto p = v->AsInt();
      if (!p || *p <= 0) return Corrupt("{}: {}: expected a positive integer", gguf.path(), pattern_key);
      pattern = *p;
    }
  }
  for (int64_t i = 0; pattern > 0 && i < c.num_layers; ++i) {
    // Gemma 2: layers 0, 2, ... slide; Gemma 3: all but layers pattern - 1, 2 * pattern - 1, ...
    c.sliding_layers[static_cast<size_t>(i)] = gemma3 ? (i + 1) % pattern != 0 : i % pattern == 0;
  }
  if (gemma3) c.rope_local_theta = 10000.0;
  return Status::Ok();
}

// The experts as llama.cpp writes them: <arch>.expert_count and
// expert_used_count (Mixtral is arch llama with them), qwen2moe/qwen3moe's
// expert_feed_forward_length and qwen2moe's
// expert_shared_feed_forward_length. llama.cpp renormalizes the chosen
// experts' weights for llama and qwen3moe, not for qwen2moe. A layer
// without a router (ffn_gate_inp) has a dense MLP.
Status MoeFromGguf(const GgufFile& gguf, const GgufKeys& keys, ModelConfig* out) {
  ModelConfig& c = *out;
  KILN_ASSIGN_OR_RETURN(auto count, keys.OptionalInt("expert_count"));
  const bool moe_arch = c.arch == Architecture::kQwen2Moe || c.arch == Architecture::kQwen3Moe;
  if (!count || *count == 0) {
    if (moe_arch) return NotFound("{}: missing metadata key '{}'", gguf.path(), keys.Key("expert_count"));
    return Status::Ok();
  }
  if (c.arch == Architecture::kLlama) {
    c.arch = Architecture::kMixtral;
    c.hf_architecture = "MixtralForCausalLM";
  } else if (!moe_arch) {
    return Unsupported("{}: {}: experts in this architecture are not supported", gguf.path(),
                       keys.Key("expert_count"));
  }
  c.num_experts = *count;
  KILN_ASSIGN_OR_RETURN(c.experts_per_token, keys.RequiredInt("expert_used_count"));
  c.normalize_expert_weights = c.arch != Architecture::kQwen2Moe;
  if (moe_arch) {
    KILN_ASSIGN_OR_RETURN(c.expert_intermediate_size, keys.RequiredInt("expert_feed_forward_length"));
  }
  if (c.arch == Architecture::kQwen2Moe) {
    KILN_ASSIGN_OR_RETURN(c.shared_expert_intermediate_size,
                          keys.RequiredInt("expert_shared_feed_forward_length"));
  }
  if (c.num_layers <= 0 || c.num_layers > kMaxLayers) return Status::Ok();  // Validate says why
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    dense[static_cast<size_t>(i)] = gguf.FindTensor(fmt::format("blk.{}.ffn_gate_inp.weight", i)) == nullptr;
  }
  if (std::find(dense.begin(), dense.end(), true) != dense.end()) c.dense_mlp_layers = std::move(dense);
  return Status::Ok();
}

}  // namespace

double RopeScaling::LongRopeAttentionFactor() const {
  if (attention_factor > 0) return attention_factor;
  if (factor <= 1 || original_max_position_embeddings <= 1) return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original_max_position_embeddings)));
}

const char* const kLongRopeFactorTensors[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};

const char* ArchitectureName(Architecture a) {
  for (const auto& entry : kArchitectures) {
    if (entry.arch == a) return entry.model_type;
  }
  return "unknown";
}

std::string SupportedArchitectureList() {
  std::string out;
  for (const auto& a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a.hf_name;
  }
  return out;
}

bool ModelConfig::LayerIsMoe(int64_t layer) const {
  if (num_experts <= 0) return false;
  return dense_mlp_layers.empty() || layer < 0 || layer >= static_cast<int64_t>(dense_mlp_layers.size()) ||
         !dense_mlp_layers[static_cast<size_t>(layer)];
}

int64_t ModelConfig::ActiveParameterCount() const {
  int64_t unused = 0;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (LayerIsMoe(l)) unused += (num_experts - experts_per_token) * 3 * hidden_size * expert_intermediate_size;
  }
  return ParameterCount() - unused;
}

int64_t ModelConfig::ParameterCount() const {
  int64_t q_dim = num_heads * head_dim;
  int64_t kv_dim = num_kv_heads * head_dim;
  int64_t attention = hidden_size * q_dim + 2 * hidden_size * kv_dim + q_dim * hidden_size;
  if (attention_bias) attention += q_dim + 2 * kv_dim;
  if (attention_output_bias) attention += hidden_size;
  if (qk_norm) attention += 2 * head_dim;
  int64_t norms = (gemma_norms ? 4 : 2) * hidden_size;
  int64_t layers = num_layers * (attention + norms);
  for (int64_t l = 0; l < num_layers; ++l) {
    if (!LayerIsMoe(l)) {
      layers += 3 * hidden_size * intermediate_size;
      continue;
    }
    layers += num_experts * hidden_size;  // router
    layers += num_experts * 3 * hidden_size * expert_intermediate_size;
    if (shared_expert_intermediate_size > 0) {
      layers += 3 * hidden_size * shared_expert_intermediate_size + hidden_size;
    }
  }
  int64_t embedding = vocab_size * hidden_size;
  return embedding + layers + hidden_size + (tie_word_embeddings ? 0 : embedding);
}

int64_t ModelConfig::KvBytesPerToken(double bytes_per_element) const {
  double elements = 2.0 * static_cast<double>(num_layers) * static_cast<double>(num_kv_heads) *
                    static_cast<double>(head_dim);
  return static_cast<int64_t>(std::llround(elements * bytes_per_element));
}

bool ModelConfig::LayerSlides(int64_t layer) const {
  if (sliding_window <= 0) return false;
  if (sliding_layers.empty()) return true;
  return layer >= 0 && layer < static_cast<int64_t>(sliding_layers.size()) &&
         sliding_layers[static_cast<size_t>(layer)];
}

double ModelConfig::LayerRopeTheta(int64_t layer) const {
  return rope_local_theta > 0 && LayerSlides(layer) ? rope_local_theta : rope_theta;
}

double ModelConfig::AttentionScale() const {
  const double d = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  return 1.0 / std::sqrt(d);
}

Status ModelConfig::Validate() const {
  struct Limit {
    const char* name;
    int64_t value;
    int64_t max;
  };
  const Limit limits[] = {
      {"vocab_size", vocab_size, kMaxVocab},
      {"hidden_size", hidden_size, kMaxHidden},
      {"intermediate_size", intermediate_size, kMaxIntermediate},
      {"num_layers", num_layers, kMaxLayers},
      {"num_heads", num_heads, kMaxHeads},
      {"num_kv_heads", num_kv_heads, kMaxHeads},
      {"head_dim", head_dim, kMaxHeadDim},
  };
  for (const auto& l : limits) {
    if (l.value <= 0 || l.value > l.max) {
      return InvalidArgument("{} {} is outside [1, {}]", l.name, l.value, l.max);
    }
  }
  if (num_heads % num_kv_heads != 0) {
    return InvalidArgument("num_heads {} is not a multiple of num_kv_heads {}", num_heads, num_kv_heads);
  }
  if (head_dim % 2 != 0) return InvalidArgument("head_dim {} is odd; RoPE rotates pairs", head_dim);
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    return InvalidArgument("rotary dims {} are not an even number in [0, head_dim {}]", rotary_dim, head_dim);
  }
  if (max_position_embeddings <= 0) {
    return InvalidArgument("max_position_embeddings {} is not positive", max_position_embeddings);
  }
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) {
    return InvalidArgument("rms_norm_eps {} is not a positive number", rms_norm_eps);
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) {
    return InvalidArgument("rope_theta {} is not a positive number", rope_theta);
  }
  if (rope_scaling.type != RopeScalingType::kNone &&
      (!(rope_scaling.factor > 0) || !std::isfinite(rope_scaling.factor))) {
    return InvalidArgument("rope scaling factor {} is not a positive number", rope_scaling.factor);
  }
  if (rope_scaling.type == RopeScalingType::kLlama3) {
    if (rope_scaling.original_max_position_embeddings <= 0) {
      return InvalidArgument("llama3 rope scaling needs a positive original_max_position_embeddings");
    }
    if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
        !(rope_scaling.low_freq_factor > 0)) {
      return InvalidArgument("llama3 rope scaling needs 0 < low_freq_factor ({}) < high_freq_factor ({})",
                             rope_scaling.low_freq_factor, rope_scaling.high_freq_factor);
    }
  }
  if (rope_scaling.type == RopeScalingType::kLongRope) {
    if (rope_scaling.original_max_position_embeddings <= 0) {
      return InvalidArgument("longrope scaling needs a positive original_max_position_embeddings");
    }
    const size_t pairs = static_cast<size_t>(RotaryDim() / 2);
    for (const auto* f : {&rope_scaling.short_factor, &rope_scaling.long_factor}) {
      if (f->size() != pairs) {
        return InvalidArgument("longrope {} factors: {} of them, the {} rotary dims need {}",
                               f == &rope_scaling.short_factor ? "short" : "long", f->size(), RotaryDim(),
                               pairs);
      }
      for (double x : *f) {
        if (!(x > 0) || !std::isfinite(x)) {
          return InvalidArgument("longrope factor {} is not a positive number", x);
        }
      }
    }
  }
  if (num_experts != 0) {
    if (num_experts < 0 || num_experts > kMaxExperts) {
      return InvalidArgument("num_experts {} is outside [1, {}]", num_experts, kMaxExperts);
    }
    if (experts_per_token <= 0 || experts_per_token > num_experts) {
      return InvalidArgument("experts per token {} is outside [1, num_experts {}]", experts_per_token,
                             num_experts);
    }
    if (expert_intermediate_size <= 0 || expert_intermediate_size > kMaxIntermediate) {
      return InvalidArgument("expert intermediate size {} is outside [1, {}]", expert_intermediate_size,
                             kMaxIntermediate);
    }
    if (shared_expert_intermediate_size < 0 || shared_expert_intermediate_size > kMaxIntermediate) {
      return InvalidArgument("shared expert intermediate size {} is outside [0, {}]",
                             shared_expert_intermediate_size, kMaxIntermediate);
    }
    if (!dense_mlp_layers.empty() && static_cast<int64_t>(dense_mlp_layers.size()) != num_layers) {
      return InvalidArgument("{} layer MLP kinds for {} layers", dense_mlp_layers.size(), num_layers);
    }
  }
  if (sliding_window < 0) return InvalidArgument("sliding_window {} is negative", sliding_window);
  if (!sliding_layers.empty() && static_cast<int64_t>(sliding_layers.size()) != num_layers) {
    return InvalidArgument("{} layer attention kinds for {} layers", sliding_layers.size(), num_layers);
  }
  for (double v : {rope_local_theta, query_pre_attn_scalar, attn_logit_softcap, final_logit_softcap}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return InvalidArgument("a Gemma parameter ({}) is negative or not a number", v);
    }
  }
  for (const auto* ids : {&bos_token_ids, &eos_token_ids}) {
    for (int64_t id : *ids) {
      if (id < 0 || id >= vocab_size) {
        return InvalidArgument("{} token id {} is outside the vocabulary [0, {})",
                               ids == &bos_token_ids ? "bos" : "eos", id, vocab_size);
      }
    }
  }
  return Status::Ok();
}

Expected<ModelConfig> ModelConfigFromHfJson(const json& j, const std::string& source) {
  if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", source);
  if (const char* wrapper = TextTowerWrapperOf(j)) {
    KILN_ASSIGN_OR_RETURN(json text, TextTowerConfig(j, source));
    KILN_ASSIGN_OR_RETURN(ModelConfig c, ModelConfigFromHfJson(text, source + " (text_config)"));
    c.hf_architecture = wrapper;
    c.text_tower_of_multimodal = true;
    return c;
  }
  ModelConfig c;
  KILN_ASSIGN_OR_RETURN(c.arch, ArchitectureFromHf(j, source, &c.hf_architecture));
  KILN_ASSIGN_OR_RETURN(c.vocab_size, RequiredInt(j, "vocab_size", source));
  KILN_ASSIGN_OR_RETURN(c.hidden_size, RequiredInt(j, "hidden_size", source));
  KILN_ASSIGN_OR_RETURN(c.intermediate_size, RequiredInt(j, "intermediate_size", source));
  KILN_ASSIGN_OR_RETURN(c.num_layers, RequiredInt(j, "num_hidden_layers", source));
  KILN_ASSIGN_OR_RETURN(c.num_heads, RequiredInt(j, "num_attention_heads", source));
  KILN_ASSIGN_OR_RETURN(c.num_kv_heads, IntOr(j, "num_key_value_heads", c.num_heads, source));
  KILN_ASSIGN_OR_RETURN(auto head_dim, OptionalInt(j, "head_dim", source));
  if (head_dim) {
    c.head_dim = *head_dim;
  } else {
    if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0) {
      return InvalidArgument("{}: no head_dim, and hidden_size {} is not divisible by num_attention_heads {}",
                             source, c.hidden_size, c.num_heads);
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  KILN_ASSIGN_OR_RETURN(c.max_position_embeddings, RequiredInt(j, "max_position_embeddings", source));
  KILN_ASSIGN_OR_RETURN(c.rms_norm_eps, FloatOr(j, "rms_norm_eps", 1e-6, source));
  KILN_ASSIGN_OR_RETURN(c.rope_theta, FloatOr(j, "rope_theta", 10000.0, source));
  // transformers rotates int(head_dim * partial_rotary_factor) dims.
  KILN_ASSIGN_OR_RETURN(double partial, FloatOr(j, "partial_rotary_factor", 1.0, source));
  if (!(partial > 0 && partial <= 1)) {
    return InvalidArgument("{}: partial_rotary_factor {} is outside (0, 1]", source, partial);
  }
  c.rotary_dim = partial == 1.0 ? 0 : static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  KILN_ASSIGN_OR_RETURN(c.rope_scaling, RopeScalingFromHf(j, c.max_position_embeddings, source));
  KILN_ASSIGN_OR_RETURN(std::string act, StringOr(j, "hidden_act", "silu", source));
  // Gemma's configs name the MLP's activation hidden_activation.
  KILN_ASSIGN_OR_RETURN(act, StringOr(j, "hidden_activation", act, source));
  KILN_ASSIGN_OR_RETURN(c.activation, ActivationFromName(act, source));
  KILN_ASSIGN_OR_RETURN(c.tie_word_embeddings, BoolOr(j, "tie_word_embeddings", false, source));

  KILN_ASSIGN_OR_RETURN(bool mlp_bias, BoolOr(j, "mlp_bias", false, source));
  if (mlp_bias) return Unsupported("{}: mlp_bias: MLP biases are not supported", source);
  switch (c.arch) {
    case Architecture::kQwen2:
    case Architecture::kQwen2Moe:
      c.attention_bias = true;  // Qwen2 always has q/k/v biases and never an o_proj bias
      break;
    case Architecture::kLlama:
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe: {
      KILN_ASSIGN_OR_RETURN(bool bias, BoolOr(j, "attention_bias", false, source));
      c.attention_bias = bias;
      c.attention_output_bias = bias;
      break;
    }
    case Architecture::kMistral:
    case Architecture::kMixtral:
    case Architecture::kPhi3: break;  // no biases
    case Architecture::kGemma2:
    case Architecture::kGemma3: {
      KILN_ASSIGN_OR_RETURN(bool bias, BoolOr(j, "attention_bias", false, source));
      if (bias) return Unsupported("{}: attention_bias: Gemma attention biases are not supported", source);
      KILN_RETURN_IF_ERROR(GemmaFromHf(j, source, &c));
      break;
    }
  }
  c.qk_norm = c.qk_norm || c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe;
  if (c.arch == Architecture::kMixtral || c.arch == Architecture::kQwen2Moe || c.arch == Architecture::kQwen3Moe) {
    KILN_RETURN_IF_ERROR(MoeFromHf(j, source, &c));
  }

  // Mistral, Mixtral and Phi-3 always honour sliding_window; the Qwens only
  // when use_sliding_window is set (their configs carry a window either way).
  if (c.arch == Architecture::kMistral || c.arch == Architecture::kMixtral || c.arch == Architecture::kPhi3) {
    KILN_ASSIGN_OR_RETURN(c.sliding_window, IntOr(j, "sliding_window", 0, source));
  } else if (c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3 ||
             c.arch == Architecture::kQwen2Moe || c.arch == Architecture::kQwen3Moe) {
    KILN_ASSIGN_OR_RETURN(bool use, BoolOr(j, "use_sliding_window", false, source));
    if (use) {
      KILN_ASSIGN_OR_RETURN(c.sliding_window, IntOr(j, "sliding_window", 0, source));
    }
  }

  KILN_ASSIGN_OR_RETURN(c.bos_token_ids, TokenIds(j, "bos_token_id", source));
  KILN_ASSIGN_OR_RETURN(c.eos_token_ids, TokenIds(j, "eos_token_id", source));
  KILN_ASSIGN_OR_RETURN(c.torch_dtype, StringOr(j, "torch_dtype", "", source));
  if (c.torch_dtype.empty()) {
    KILN_ASSIGN_OR_RETURN(c.torch_dtype, StringOr(j, "dtype", "", source));
  }
  Status valid = c.Validate();
  if (!valid.ok()) return valid.WithContext(source);
  return c;
}

Expected<ModelConfig> ModelConfigFromHfFile(const std::string& config_json_path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_json_path));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument("{}: invalid JSON: {}", config_json_path, e.what());
  }
  return ModelConfigFromHfJson(j, config_json_path);
}

Expected<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf) {
  const std::string& source = gguf.path();
  auto arch_name = gguf.GetString("general.architecture");
  if (!arch_name) return NotFound("{}: missing metadata key 'general.architecture'", source);
  ModelConfig c;
  if (*arch_name == "llama") {
    // Mistral models are written as llama too.
    c.arch = Architecture::kLlama;
    c.hf_architecture = "LlamaForCausalLM";
    // llama.cpp's converter permutes q/k rows so that adjacent pairs rotate.
    c.rope_style = RopeStyle::kInterleaved;
  } else if (*arch_name == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.hf_architecture = "Qwen2ForCausalLM";
  } else if (*arch_name == "qwen3") {
    c.arch = Architecture::kQwen3;
    c.hf_architecture = "Qwen3ForCausalLM";
  } else if (*arch_name == "phi3") {
    c.arch = Architecture::kPhi3;
    c.hf_architecture = "Phi3ForCausalLM";
  } else if (*arch_name == "gemma2") {
    c.arch = Architecture::kGemma2;
    c.hf_architecture = "Gemma2ForCausalLM";
  } else if (*arch_name == "gemma3") {
    c.arch = Architecture::kGemma3;
    c.hf_architecture = "Gemma3ForCausalLM";
  } else if (*arch_name == "qwen2moe") {
    c.arch = Architecture::kQwen2Moe;
    c.hf_architecture = "Qwen2MoeForCausalLM";
  } else if (*arch_name == "qwen3moe") {
    c.arch = Architecture::kQwen3Moe;
    c.hf_architecture = "Qwen3MoeForCausalLM";
  } else {
    return Unsupported(
        "{}: general.architecture '{}' is not supported; supported: llama, qwen2, qwen3, phi3, gemma2, gemma3, "
        "qwen2moe, qwen3moe",
        source, *arch_name);
  }
  GgufKeys keys(gguf, *arch_name);
  KILN_ASSIGN_OR_RETURN(c.max_position_embeddings, keys.RequiredInt("context_length"));
  KILN_ASSIGN_OR_RETURN(c.hidden_size, keys.RequiredInt("embedding_length"));
  KILN_ASSIGN_OR_RETURN(c.num_layers, keys.RequiredInt("block_count"));
  KILN_RETURN_IF_ERROR(MoeFromGguf(gguf, keys, &c));
  if (c.num_experts == 0 || c.arch == Architecture::kMixtral) {
    KILN_ASSIGN_OR_RETURN(c.intermediate_size, keys.RequiredInt("feed_forward_length"));
    if (c.arch == Architecture::kMixtral) c.expert_intermediate_size = c.intermediate_size;
  } else {
    KILN_ASSIGN_OR_RETURN(auto dense_width, keys.OptionalInt("feed_forward_length"));
    c.intermediate_size = dense_width.value_or(c.expert_intermediate_size);
  }
  KILN_ASSIGN_OR_RETURN(c.num_heads, keys.RequiredInt("attention.head_count"));
  KILN_ASSIGN_OR_RETURN(auto kv_heads, keys.OptionalInt("attention.head_count_kv"));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);
  KILN_ASSIGN_OR_RETURN(auto key_length, keys.OptionalInt("attention.key_length"));
  if (key_length) {
    c.head_dim = *key_length;
  } else {
    if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0) {
      return Corrupt("{}: no {}, and the embedding length {} is not divisible by the head count {}", source,
                     keys.Key("attention.key_length"), c.hidden_size, c.num_heads);
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  KILN_ASSIGN_OR_RETURN(auto rope_dims, keys.OptionalInt("rope.dimension_count"));
  if (rope_dims && *rope_dims != c.head_dim) c.rotary_dim = *rope_dims;
  KILN_ASSIGN_OR_RETURN(c.rms_norm_eps, keys.FloatOr("attention.layer_norm_rms_epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(c.rope_theta, keys.FloatOr("rope.freq_base", 10000.0));

  // Vocabulary: the explicit key, else the token list, else the embedding rows.
  KILN_ASSIGN_OR_RETURN(auto vocab, keys.OptionalInt("vocab_size"));
  if (vocab) {
    c.vocab_size = *vocab;
  } else if (const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->is_array()) {
    c.vocab_size = static_cast<int64_t>(tokens->items().size());
  } else if (const GgufTensorInfo* embd = gguf.FindTensor("token_embd.weight");
             embd != nullptr && embd->dims.size() == 2) {
    c.vocab_size = embd->dims[1];
  } else {
    return NotFound("{}: cannot tell the vocabulary size: no {}, tokenizer.ggml.tokens or token_embd.weight",
                    source, keys.Key("vocab_size"));
  }

  if (const GgufValue* type = gguf.Find(keys.Key("rope.scaling.type")); type != nullptr) {
    const std::string* name = type->AsString();
    if (name == nullptr) return Corrupt("{}: {}: expected a string", source, keys.Key("rope.scaling.type"));
    if (*name == "linear" || *name == "yarn") {
      c.rope_scaling.type = *name == "linear" ? RopeScalingType::kLinear : RopeScalingType::kYarn;
      KILN_ASSIGN_OR_RETURN(c.rope_scaling.factor, keys.FloatOr("rope.scaling.factor", 1.0));
      KILN_ASSIGN_OR_RETURN(auto original, keys.OptionalInt("rope.scaling.original_context_length"));
      c.rope_scaling.original_max_position_embeddings = original.value_or(c.max_position_embeddings);
      KILN_ASSIGN_OR_RETURN(c.rope_scaling.beta_fast, keys.FloatOr("rope.scaling.yarn_beta_fast", 32.0));
      KILN_ASSIGN_OR_RETURN(c.rope_scaling.beta_slow, keys.FloatOr("rope.scaling.yarn_beta_slow", 1.0));
      KILN_ASSIGN_OR_RETURN(c.rope_scaling.attention_factor, keys.FloatOr("rope.scaling.attn_factor", 0.0));
    } else if (*name != "none") {
      return Unsupported("{}: {} '{}' is not supported (none, linear and yarn are)", source,
                         keys.Key("rope.scaling.type"), *name);
    }
  }
  if (gguf.FindTensor(kLongRopeFactorTensors[0]) != nullptr ||
      gguf.FindTensor(kLongRopeFactorTensors[1]) != nullptr) {
    KILN_ASSIGN_OR_RETURN(c.rope_scaling, LongRopeFromGguf(gguf, keys, c.max_position_embeddings));
  }
  KILN_ASSIGN_OR_RETURN(auto window, keys.OptionalInt("attention.sliding_window"));
  c.sliding_window = window.value_or(0);

  c.tie_word_embeddings = gguf.FindTensor("output.weight") == nullptr;
  c.attention_bias = gguf.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.attention_output_bias = gguf.FindTensor("blk.0.attn_output.bias") != nullptr;
  c.qk_norm = c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe;
  if (c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3) {
    KILN_RETURN_IF_ERROR(GemmaFromGguf(gguf, keys, &c));
  }

  GgufKeys global(gguf, "tokenizer.ggml");
  KILN_ASSIGN_OR_RETURN(auto bos, global.OptionalInt("bos_token_id"));
  KILN_ASSIGN_OR_RETURN(auto eos, global.OptionalInt("eos_token_id"));
  if (bos) c.bos_token_ids.push_back(*bos);
  if (eos) c.eos_token_ids.push_back(*eos);

  Status valid = c.Validate();
  if (!valid.ok()) return valid.WithContext(source);
  return c;
}

}  // namespace kiln
