// Building GGUF metadata from a Hugging Face folder: config.json for the
// hyper-parameters, the tokenizer files for the vocabulary.
#include "quantize/quantize_metadata.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_input.h"
#include "core/mapped_file.h"
#include "tokenizer/bpe_vocab_files.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_spec.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The quantization scheme version of the block layouts kiln writes (ggml's
// GGML_QNT_VERSION since the k-quants).
constexpr uint32_t kQuantizationVersion = 2;
// Scores llama.cpp's converter gives SentencePiece ids the model lacks.
constexpr float kPaddingScore = -10000.0f;
constexpr float kAddedTokenScore = -1000.0f;

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

class MetadataBuilder {
 public:
  void U32(const std::string& key, int64_t v) {
    out_.emplace_back(key, GgufValue::UInt(GgufType::kU32, static_cast<uint64_t>(v)));
  }
  void F32(const std::string& key, double v) { out_.emplace_back(key, GgufValue::Float(GgufType::kF32, v)); }
  void Bool(const std::string& key, bool v) { out_.emplace_back(key, GgufValue::Int(GgufType::kBool, v ? 1 : 0)); }
  void String(const std::string& key, std::string v) { out_.emplace_back(key, GgufValue::String(std::move(v))); }
  void Array(const std::string& key, GgufType element, std::vector<GgufValue> items) {
    out_.emplace_back(key, GgufValue::Array(element, std::move(items)));
  }
  GgufMetadata Take() { return std::move(out_); }

 private:
  GgufMetadata out_;
};

// Whether config.json states head_dim (llama.cpp then writes key/value_length).
Expected<bool> ConfigStatesHeadDim(const fs::path& config_path) {
  KILN_ASSIGN_OR_RETURN(json j, ReadJsonFile(config_path.string()));
  if (!j.is_object()) return Corrupt("{}: not a JSON object", config_path.string());
  const json* head_dim = JsonField(j, "head_dim");
  return head_dim != nullptr && head_dim->is_number_integer();
}

// tokenizer_config.json's pad_token content, or "" when it names none.
std::string PadTokenContent(const fs::path& folder) {
  Expected<json> config = ReadJsonFile((folder / "tokenizer_config.json").string());
  if (!config.ok()) return "";
  const json* pad = JsonField(*config, "pad_token");
  if (pad == nullptr) return "";
  if (pad->is_string()) return pad->get<std::string>();
  const json* content = JsonField(*pad, "content");
  return content != nullptr && content->is_string() ? content->get<std::string>() : "";
}

// Whether the layers slide as llama.cpp assumes for Gemma (2: the even
// ones; 3: all but every sixth).
bool SlidesAsLlamaCppAssumes(const ModelConfig& c) {
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool assumed = c.arch == Architecture::kGemma3 ? (i + 1) % 6 != 0 : i % 2 == 0;
    if (c.LayerSlides(i) != assumed) return false;
  }
  return true;
}

void AddHyperParameters(const ModelConfig& c, bool states_head_dim, MetadataBuilder& b, const std::string& arch) {
  auto key = [&](const char* k) { return arch + "." + k; };
  b.U32(key("context_length"), c.max_position_embeddings);
  b.U32(key("embedding_length"), c.hidden_size);
  b.U32(key("block_count"), c.num_layers);
  b.U32(key("feed_forward_length"), c.intermediate_size);
  b.U32(key("attention.head_count"), c.num_heads);
  b.U32(key("attention.head_count_kv"), c.num_kv_heads);
  b.F32(key("rope.freq_base"), c.rope_theta);
  b.F32(key("attention.layer_norm_rms_epsilon"), c.rms_norm_eps);
  if (states_head_dim) {
    b.U32(key("attention.key_length"), c.head_dim);
    b.U32(key("attention.value_length"), c.head_dim);
  }
  if (arch == "llama") b.U32(key("vocab_size"), c.vocab_size);
  // llama.cpp takes it as the rotated width of every architecture.
  b.U32(key("rope.dimension_count"), c.RotaryDim());
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kLongRope) {
    // The factor lists go as tensors (rope_factors_long/short).
    b.U32(key("rope.scaling.original_context_length"), rs.original_max_position_embeddings);
    b.F32(key("rope.scaling.attn_factor"), rs.LongRopeAttentionFactor());
  }
  if (rs.type == RopeScalingType::kLinear || rs.type == RopeScalingType::kYarn) {
    b.String(key("rope.scaling.type"), rs.type == RopeScalingType::kLinear ? "linear" : "yarn");
    b.F32(key("rope.scaling.factor"), rs.factor);
    if (rs.original_max_position_embeddings > 0) {
      b.U32(key("rope.scaling.original_context_length"), rs.original_max_position_embeddings);
    }
    if (rs.type == RopeScalingType::kYarn) {
      b.F32(key("rope.scaling.yarn_beta_fast"), rs.beta_fast);
      b.F32(key("rope.scaling.yarn_beta_slow"), rs.beta_slow);
      if (rs.attention_factor > 0) b.F32(key("rope.scaling.attn_factor"), rs.attention_factor);
    }
  }
  if (c.num_experts > 0) {
    b.U32(key("expert_count"), c.num_experts);
    b.U32(key("expert_used_count"), c.experts_per_token);
    if (arch != "llama") b.U32(key("expert_feed_forward_length"), c.expert_intermediate_size);
    if (c.shared_expert_intermediate_size > 0) {
      b.U32(key("expert_shared_feed_forward_length"), c.shared_expert_intermediate_size);
    }
  }
  if (c.sliding_window > 0) b.U32(key("attention.sliding_window"), c.sliding_window);
  if (c.attn_logit_softcap > 0) b.F32(key("attn_logit_softcapping"), c.attn_logit_softcap);
  if (c.final_logit_softcap > 0) b.F32(key("final_logit_softcapping"), c.final_logit_softcap);
  if (c.gemma_norms && !SlidesAsLlamaCppAssumes(c)) {
    // One flag a layer, as kiln's reader takes it (llama.cpp assumes the
    // default pattern for these architectures).
    std::vector<GgufValue> flags;
    for (int64_t i = 0; i < c.num_layers; ++i) flags.push_back(GgufValue::Int(GgufType::kBool, c.LayerSlides(i)));
    b.Array(key("attention.sliding_window_pattern"), GgufType::kBool, std::move(flags));
  }
}

// What a Gemma GGUF file cannot say, llama.cpp derives from the model's
// size; a config that differs is refused rather than written wrong.
Status CheckGemmaFitsGguf(const ModelConfig& c, const std::string& where) {
  const bool gemma3 = c.arch == Architecture::kGemma3;
  const bool is_27b = c.num_layers == (gemma3 ? 62 : 46);
  const double implied = is_27b && c.num_heads > 0 ? static_cast<double>(c.hidden_size / c.num_heads)
                                                   : static_cast<double>(c.head_dim);
  const double stated = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim);
  if (stated != implied) {
    return Unsupported("{}: query_pre_attn_scalar {}: a Gemma GGUF file implies {} for this model's size", where,
                       c.query_pre_attn_scalar, implied);
  }
  if (gemma3 && c.rope_local_theta != 10000.0) {
    return Unsupported("{}: rope_local_base_freq {}: Gemma 3 GGUF files imply 10000", where, c.rope_local_theta);
  }
  return Status::Ok();
}

// llama.cpp renormalizes the chosen experts' weights for Mixtral and
// Qwen3-MoE and never for Qwen2-MoE; a GGUF file cannot say otherwise, so a
// config that does is refused rather than written wrong.
Status CheckMoeFitsGguf(const ModelConfig& c, const std::string& where) {
  if (c.num_experts <= 0) return Status::Ok();
  const bool implied = c.arch != Architecture::kQwen2Moe;
  if (c.normalize_expert_weights != implied) {
    return Unsupported("{}: norm_topk_prob {}: a {} GGUF file implies {}", where, c.normalize_expert_weights,
                       GgufArchitectureName(c.arch), implied);
  }
  return Status::Ok();
}

// The tokenizer files of `folder` as a spec, in llama.cpp's converter's order
// of preference (tokenizer.model first).
Expected<TokenizerSpec> ReadFolderTokenizer(const fs::path& folder, const TokenizerConfig& config) {
  TokenizerSpec spec;
  if (IsFile(folder / "tokenizer.model")) {
    KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString((folder / "tokenizer.model").string()));
    KILN_ASSIGN_OR_RETURN(spec, ParseSentencePieceModel(bytes, (folder / "tokenizer.model").string()));
  } else if (IsFile(folder / "tokenizer.json")) {
    KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString((folder / "tokenizer.json").string()));
    KILN_ASSIGN_OR_RETURN(spec, ParseHfTokenizerJson(text, (folder / "tokenizer.json").string()));
  } else if (IsFile(folder / "vocab.json") && IsFile(folder / "merges.txt")) {
    KILN_ASSIGN_OR_RETURN(spec, ReadBpeVocabFiles((folder / "vocab.json").string(), (folder / "merges.txt").string(),
                                                  DetectBpeFamily(config)));
  } else {
    return NotFound("{}: no tokenizer files (tokenizer.model, tokenizer.json or vocab.json + merges.txt)",
                    folder.string());
  }
  KILN_RETURN_IF_ERROR(ApplyTokenizerConfig(config, spec));
  ApplyDefaultSpecialIds(config, spec);
  return spec;
}

GgufTokenType TypeOfKind(TokenKind kind) {
  switch (kind) {
    case TokenKind::kNormal: return GgufTokenType::kNormal;
    case TokenKind::kByte: return GgufTokenType::kByte;
    case TokenKind::kControl: return GgufTokenType::kControl;
    case TokenKind::kUnknown: return GgufTokenType::kUnknown;
    case TokenKind::kUserDefined: return GgufTokenType::kUserDefined;
    case TokenKind::kUnused: return GgufTokenType::kUnused;
  }
  return GgufTokenType::kNormal;
}

Status AddTokenizer(const fs::path& folder, const ModelConfig& c, MetadataBuilder& b) {
  KILN_ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(folder.string()));
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, ReadFolderTokenizer(folder, config));
  const bool sentencepiece = spec.flavor == BpeFlavor::kScoredPieces;
  if (spec.flavor == BpeFlavor::kRankedChars) {
    return Unsupported(
        "{}: a character-level BPE tokenizer.json without tokenizer.model: GGUF's SentencePiece vocabulary needs "
        "the piece scores of tokenizer.model",
        spec.source);
  }

  // Ids: the vocabulary, the added tokens past it, padding up to the
  // embedding rows (as llama.cpp's converter pads).
  int64_t n = static_cast<int64_t>(spec.pieces.size());
  for (const AddedToken& t : spec.added_tokens) n = std::max<int64_t>(n, t.id + 1);
  if (n > c.vocab_size) {
    return InvalidArgument("{}: the tokenizer has {} ids, more than the {} rows of the embedding", spec.source, n,
                           c.vocab_size);
  }
  n = c.vocab_size;
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<GgufTokenType> types(static_cast<size_t>(n), GgufTokenType::kUnused);
  std::vector<float> scores(static_cast<size_t>(n), kPaddingScore);
  for (size_t i = 0; i < spec.pieces.size(); ++i) {
    if (spec.pieces[i].empty()) continue;
    pieces[i] = spec.pieces[i];
    types[i] = TypeOfKind(spec.kinds[i]);
    scores[i] = i < spec.scores.size() ? spec.scores[i] : 0.0f;
  }
  for (const AddedToken& t : spec.added_tokens) {
    auto i = static_cast<size_t>(t.id);
    bool ordinary = pieces[i].empty() || types[i] == GgufTokenType::kNormal || types[i] == GgufTokenType::kUnused;
    if (pieces[i].empty()) scores[i] = kAddedTokenScore;
    pieces[i] = t.content;
    // The vocabulary's own kind wins for its unknown, byte and control pieces.
    if (ordinary) types[i] = t.special ? GgufTokenType::kControl : GgufTokenType::kUserDefined;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (pieces[static_cast<size_t>(i)].empty()) pieces[static_cast<size_t>(i)] = fmt::format("[PAD{}]", i);
  }

  int64_t padding = -1;
  if (std::string pad = PadTokenContent(folder); !pad.empty()) {
    auto it = std::find(pieces.begin(), pieces.end(), pad);
    if (it != pieces.end()) padding = it - pieces.begin();
  }

  b.String("tokenizer.ggml.model", sentencepiece ? "llama" : "gpt2");
  if (sentencepiece) {
    b.String("tokenizer.ggml.pre", "default");
  } else {
    switch (DetectBpeFamily(config)) {
      case BpeFamily::kQwen2: b.String("tokenizer.ggml.pre", "qwen2"); break;
      case BpeFamily::kLlama3: b.String("tokenizer.ggml.pre", "llama-bpe"); break;
      case BpeFamily::kGpt2: b.String("tokenizer.ggml.pre", "gpt-2"); break;
    }
  }
  std::vector<GgufValue> token_values, score_values, type_values;
  token_values.reserve(pieces.size());
  for (std::string& p : pieces) token_values.push_back(GgufValue::String(std::move(p)));
  b.Array("tokenizer.ggml.tokens", GgufType::kString, std::move(token_values));
  if (sentencepiece) {
    for (float s : scores) score_values.push_back(GgufValue::Float(GgufType::kF32, s));
    b.Array("tokenizer.ggml.scores", GgufType::kF32, std::move(score_values));
  }
  for (GgufTokenType t : types) type_values.push_back(GgufValue::Int(GgufType::kI32, static_cast<int32_t>(t)));
  b.Array("tokenizer.ggml.token_type", GgufType::kI32, std::move(type_values));
  if (!sentencepiece) {
    std::vector<GgufValue> merges;
    merges.reserve(spec.merges.size());
    for (const auto& [left, right] : spec.merges) merges.push_back(GgufValue::String(left + " " + right));
    b.Array("tokenizer.ggml.merges", GgufType::kString, std::move(merges));
  }

  // Special ids: the tokenizer's own, else config.json's (Qwen's null
  // bos_token with bos_token_id in config.json).
  int64_t bos = spec.bos_id >= 0 ? spec.bos_id : (c.bos_token_ids.empty() ? -1 : c.bos_token_ids[0]);
  int64_t eos = spec.eos_id >= 0 ? spec.eos_id : (c.eos_token_ids.empty() ? -1 : c.eos_token_ids[0]);
  if (bos >= 0 && bos < n) b.U32("tokenizer.ggml.bos_token_id", bos);
  if (eos >= 0 && eos < n) b.U32("tokenizer.ggml.eos_token_id", eos);
  if (sentencepiece && spec.unk_id >= 0) b.U32("tokenizer.ggml.unknown_token_id", spec.unk_id);
  if (padding >= 0) b.U32("tokenizer.ggml.padding_token_id", padding);
  b.Bool("tokenizer.ggml.add_bos_token", spec.add_bos);
  if (config.add_eos_token.has_value()) b.Bool("tokenizer.ggml.add_eos_token", spec.add_eos);
  if (!spec.chat_template.empty()) b.String("tokenizer.chat_template", spec.chat_template);
  return Status::Ok();
}

}  // namespace

const char* GgufArchitectureName(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
    case Architecture::kMistral: return "llama";
    case Architecture::kQwen2: return "qwen2";
    case Architecture::kQwen3: return "qwen3";
    case Architecture::kPhi3: return "phi3";
    case Architecture::kGemma2: return "gemma2";
    case Architecture::kGemma3: return "gemma3";
    case Architecture::kMixtral: return "llama";
    case Architecture::kQwen2Moe: return "qwen2moe";
    case Architecture::kQwen3Moe: return "qwen3moe";
  }
  return "llama";
}

Expected<GgufMetadata> HfGgufMetadata(const std::string& folder, const ModelConfig& config, uint32_t file_type) {
  const fs::path dir(folder);
  if (config.gemma_norms) KILN_RETURN_IF_ERROR(CheckGemmaFitsGguf(config, (dir / "config.json").string()));
  KILN_RETURN_IF_ERROR(CheckMoeFitsGguf(config, (dir / "config.json").string()));
  if (config.rope_scaling.type == RopeScalingType::kLlama3) {
    return Unsupported("{}: Llama 3 RoPE scaling: GGUF keeps it as a rope_freqs tensor kiln does not write",
                       (dir / "config.json").string());
  }
  KILN_ASSIGN_OR_RETURN(bool states_head_dim, ConfigStatesHeadDim(dir / "config.json"));
  // A head size the reader cannot derive (multimodal configs leave it to
  // their class's default).
  states_head_dim = states_head_dim || config.num_heads <= 0 || config.head_dim * config.num_heads != config.hidden_size;
  const std::string arch = GgufArchitectureName(config.arch);
  std::string name = fs::absolute(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(dir).lexically_normal().parent_path().filename().string();

  MetadataBuilder b;
  b.String("general.architecture", arch);
  b.String("general.type", "model");
  b.String("general.name", name.empty() ? arch : name);
  AddHyperParameters(config, states_head_dim, b, arch);
  b.U32("general.file_type", file_type);
  b.U32("general.quantization_version", kQuantizationVersion);
  KILN_RETURN_IF_ERROR(AddTokenizer(dir, config, b));
  return b.Take();
}

}  // namespace kiln
