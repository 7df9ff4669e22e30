// WeightStore: opens Hugging Face folders and GGUF files under canonical
// names, converts dtypes the engine does not compute in, checks that the
// architecture's tensors are all there, and generates dummy weights and
// requantized copies.
#include "format/weight_store.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "core/log.h"
#include "core/scratch_file.h"
#include "core/shape_text.h"
#include "core/system_memory.h"
#include "format/expert_weights.h"
#include "format/fused_weights.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "format/text_tower.h"
#include "quant/dequantize.h"
#include "quant/quantize_ref.h"

namespace kiln {
namespace {

// GGUF's per-layer tensor names and their Hugging Face counterparts (the
// part between "blk.N." / "model.layers.N." and ".weight" / ".bias").
struct LayerName {
  const char* gguf;
  const char* hf;
};
constexpr LayerName kLayerNames[] = {
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"attn_qkv", "self_attn.qkv_proj"},
    // Phi-3's fused gate and up (ffn_up reads as up_proj, the entry above).
    {"ffn_up", "mlp.gate_up_proj"},
    // Mixtures of experts: the router, and Qwen2-MoE's shared expert and
    // its gate (the experts themselves: format/expert_weights).
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
};
constexpr LayerName kGlobalNames[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

// Splits "<prefix><digits>.<rest>" into the layer number and rest.
bool SplitLayer(std::string_view name, std::string_view prefix, std::string* layer, std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return false;
  *layer = std::string(name.substr(0, digits));
  *rest = name.substr(digits + 1);
  return true;
}

// Maps "<base>.<kind>" through `table` (gguf -> hf when forward).
std::optional<std::string> MapBase(std::string_view name, const LayerName* table, size_t count,
                                   bool forward) {
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view base = name.substr(0, dot);
  std::string_view kind = name.substr(dot);  // ".weight" / ".bias"
  for (size_t i = 0; i < count; ++i) {
    std::string_view from = forward ? table[i].gguf : table[i].hf;
    std::string_view to = forward ? table[i].hf : table[i].gguf;
    if (base == from) return std::string(to) + std::string(kind);
  }
  return std::nullopt;
}

// The dtypes kernels read directly; anything else is widened to f32 at load.
bool ComputesIn(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 || IsQuantized(dtype);
}

std::shared_ptr<void> AlignedBuffer(uint64_t bytes) {
  constexpr uint64_t kAlign = 64;
  uint64_t rounded = std::max<uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) return nullptr;
  return std::shared_ptr<void>(p, std::free);
}

// splitmix64: a small, well-mixed generator, so dummy weights are the same
// on every platform.
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately N(0, stddev): the sum of four 16-bit uniforms (Irwin-Hall),
// which has the right spread without a normal's unbounded tails.
float NormalLike(uint64_t& state, float stddev) {
  uint64_t r = SplitMix(state);
  float sum = 0;
  for (int i = 0; i < 4; ++i) sum += static_cast<float>((r >> (16 * i)) & 0xffff) / 65536.0f;
  constexpr float kIrwinHallStd = 0.57735027f;  // sqrt(4 / 12)
  return (sum - 2.0f) / kIrwinHallStd * stddev;
}

// Gemma's four norms a layer in llama.cpp's names: attn_norm and ffn_norm
// are the blocks' input norms (ffn_norm the MLP's, pre_feedforward_layernorm
// in Hugging Face's names), post_attention_norm and post_ffw_norm their
// outputs'.
constexpr LayerName kGemmaNormNames[] = {
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};

// A GGUF tensor name as its canonical name (to_canonical) or back, for a
// model of `config`.
std::string MapGgufName(const std::string& name, const ModelConfig& config, bool to_canonical) {
  std::string layer;
  std::string_view rest;
  // An expert's matrix is part of its layer's stacked tensor in GGUF files.
  if (!to_canonical && SplitLayer(name, "model.layers.", &layer, &rest) && rest.starts_with("mlp.experts.")) {
    for (const char* projection : {"gate", "up", "down"}) {
      if (rest.ends_with(fmt::format(".{}_proj.weight", projection))) {
        return fmt::format("blk.{}.ffn_{}_exps.weight", layer, projection);
      }
    }
  }
  if (config.gemma_norms && SplitLayer(name, to_canonical ? "blk." : "model.layers.", &layer, &rest)) {
    if (auto mapped = MapBase(rest, kGemmaNormNames, std::size(kGemmaNormNames), to_canonical)) {
      return (to_canonical ? "model.layers." : "blk.") + layer + "." + *mapped;
    }
  }
  return to_canonical ? weight_names::FromGguf(name) : weight_names::ToGguf(name);
}

// A WeightStore whose contents the factory functions below fill in.
class LoadedWeightStore : public WeightStore {
 public:
  explicit LoadedWeightStore(std::string path, ModelFormat format) {
    path_ = std::move(path);
    format_ = format;
  }

  ModelConfig& mutable_config() { return config_; }
  std::vector<Weight>& mutable_weights() { return weights_; }
  void set_gguf(std::unique_ptr<GgufFile> gguf) { gguf_ = std::move(gguf); }
  void Own(std::shared_ptr<void> p) { owned_.push_back(std::move(p)); }

  // Widens a weight of a dtype the engine does not compute in to f32.
  Status ConvertToF32(Weight& w) {
    int64_t n = w.num_elements();
    auto buffer = AlignedBuffer(static_cast<uint64_t>(n) * sizeof(float));
    if (!buffer) {
      return ResourceExhausted("{}: tensor {}: cannot allocate {} floats", w.file, w.source_name, n);
    }
    Status s = DequantizeRow(w.dtype, w.data, static_cast<float*>(buffer.get()), n);
    if (!s.ok()) return s.WithContext(fmt::format("{}: tensor {}", w.file, w.source_name));
    w.dtype = DType::kF32;
    w.file_mapped = false;
    w.data = static_cast<const uint8_t*>(buffer.get());
    w.nbytes = static_cast<uint64_t>(n) * sizeof(float);
    Own(std::move(buffer));
    return Status::Ok();
  }

  // Indexes by name, checks the architecture's tensors against the config,
  // then converts what needs it. `source` names the file(s) in messages.
  Status Finish(const std::string& source) {
    index_.clear();
    for (size_t i = 0; i < weights_.size(); ++i) {
      auto [it, inserted] = index_.emplace(weights_[i].name, i);
      if (!inserted) {
        return Corrupt("{}: tensors {} and {} both map to {}", source, weights_[it->second].source_name,
                       weights_[i].source_name, weights_[i].name);
      }
    }
    for (const WeightSpec& spec : RequiredWeights(config_)) {
      const Weight* w = Find(spec.name);
      std::string source_name =
          format_ == ModelFormat::kGguf ? MapGgufName(spec.name, config_, false) : spec.name;
      std::string shown =
          source_name == spec.name ? spec.name : fmt::format("{} ({})", source_name, spec.name);
      if (w == nullptr) {
        return NotFound(
            "{}: tensor {} is missing ({} needs it)", source, shown,
            config_.hf_architecture.empty() ? ArchitectureName(config_.arch) : config_.hf_architecture);
      }
      if (w->shape != spec.shape) {
        return Corrupt("{}: tensor {} has shape {}, the config implies {}", w->file, shown,
                       ShapeText(w->shape), ShapeText(spec.shape));
      }
    }
    for (Weight& w : weights_) {
      if (!ComputesIn(w.dtype)) KILN_RETURN_IF_ERROR(ConvertToF32(w));
    }
    return Status::Ok();
  }

  // Gemma's RMSNorm scales by (1 + w): Hugging Face files hold w, so the 1
  // is added here, once, in f32, and the norms compute as any other's.
  // (llama.cpp's converter has added it already in GGUF files.)
  Status AddOneToNorms() {
    for (Weight& w : weights_) {
      if (w.shape.size() != 1 || !IsNormWeight(w.name)) continue;
      KILN_RETURN_IF_ERROR(ConvertToF32(w));  // a copy of its own, f32 whatever it was
      auto* values = reinterpret_cast<float*>(const_cast<uint8_t*>(w.data));
      for (int64_t i = 0; i < w.num_elements(); ++i) values[i] += 1.0f;
    }
    return Status::Ok();
  }

 private:
  static bool IsNormWeight(const std::string& name) {
    const std::string_view suffix = "norm.weight";
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
};

Expected<std::unique_ptr<WeightStore>> OpenHuggingFace(const std::string& folder) {
  namespace fs = std::filesystem;
  auto store = std::make_unique<LoadedWeightStore>(folder, ModelFormat::kHuggingFace);
  KILN_ASSIGN_OR_RETURN(store->mutable_config(),
                        ModelConfigFromHfFile((fs::path(folder) / "config.json").string()));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModel> model, SafetensorsModel::Open(folder));
  const bool text_tower = store->config().text_tower_of_multimodal;
  int64_t other_towers = 0;
  for (const auto& entry : model->tensors()) {
    Weight w;
    w.name = entry.tensor->name;
    if (text_tower) {
      std::optional<std::string> name = TextTowerTensorName(w.name);
      if (!name) {
        ++other_towers;
        continue;
      }
      w.name = *name;
    }
    w.source_name = entry.tensor->name;
    w.file = entry.file->path();
    w.dtype = entry.tensor->dtype;
    w.file_dtype = w.dtype;
    w.shape = entry.tensor->shape;
    w.data = entry.tensor->data;
    w.nbytes = entry.tensor->nbytes();
    w.file_mapped = true;
    store->mutable_weights().push_back(std::move(w));
  }
  std::string source = model->files().size() == 1
                           ? model->files()[0]->path()
                           : (fs::path(folder) / "model.safetensors.index.json").string();
  // The mapped files live as long as the store.
  std::shared_ptr<SafetensorsModel> shared(std::move(model));
  store->Own(std::shared_ptr<void>(shared, shared.get()));
  if (other_towers > 0) {
    KILN_LOG_INFO("{}: {} runs its language model only; {} tensors of its other towers are not loaded",
                  folder, store->config().hf_architecture, other_towers);
  }
  KILN_RETURN_IF_ERROR(SplitFusedWeights(store->config(), &store->mutable_weights()));
  RenameMixtralWeights(store->config(), &store->mutable_weights());
  KILN_RETURN_IF_ERROR(store->Finish(source));
  if (store->config().gemma_norms) KILN_RETURN_IF_ERROR(store->AddOneToNorms());
  return std::unique_ptr<WeightStore>(std::move(store));
}

Expected<std::unique_ptr<WeightStore>> OpenGguf(const std::string& path) {
  auto store = std::make_unique<LoadedWeightStore>(path, ModelFormat::kGguf);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  KILN_ASSIGN_OR_RETURN(store->mutable_config(), ModelConfigFromGguf(*gguf));
  const bool longrope = store->config().rope_scaling.type == RopeScalingType::kLongRope;
  for (const GgufTensorInfo& t : gguf->tensors()) {
    // The config holds longrope's factors.
    if (longrope && (t.name == kLongRopeFactorTensors[0] || t.name == kLongRopeFactorTensors[1])) continue;
    Weight w;
    w.name = MapGgufName(t.name, store->config(), true);
    w.source_name = t.name;
    w.file = path;
    w.dtype = t.dtype;
    w.file_dtype = w.dtype;
    w.shape = t.shape();
    w.data = t.data;
    w.nbytes = t.nbytes;
    w.file_mapped = true;
    store->mutable_weights().push_back(std::move(w));
  }
  store->set_gguf(std::move(gguf));
  KILN_RETURN_IF_ERROR(SplitFusedWeights(store->config(), &store->mutable_weights()));
  KILN_RETURN_IF_ERROR(SplitStackedExperts(store->config(), &store->mutable_weights()));
  KILN_RETURN_IF_ERROR(store->Finish(path));
  return std::unique_ptr<WeightStore>(std::move(store));
}

}  // namespace

const char* ModelFormatName(ModelFormat f) {
  switch (f) {
    case ModelFormat::kHuggingFace: return "Hugging Face";
    case ModelFormat::kGguf: return "GGUF";
    case ModelFormat::kDummy: return "dummy";
    case ModelFormat::kArtifact: return "kiln artifact";
  }
  return "unknown";
}

std::vector<WeightSpec> RequiredWeights(const ModelConfig& c) {
  using weight_names::ExpertSuffix;
  using weight_names::Layer;
  int64_t q_dim = c.num_heads * c.head_dim;
  int64_t kv_dim = c.num_kv_heads * c.head_dim;
  std::vector<WeightSpec> specs;
  specs.push_back({weight_names::Embedding(), {c.vocab_size, c.hidden_size}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    specs.push_back({Layer(i, "input_layernorm.weight"), {c.hidden_size}});
    specs.push_back({Layer(i, "self_attn.q_proj.weight"), {q_dim, c.hidden_size}});
    specs.push_back({Layer(i, "self_attn.k_proj.weight"), {kv_dim, c.hidden_size}});
    specs.push_back({Layer(i, "self_attn.v_proj.weight"), {kv_dim, c.hidden_size}});
    specs.push_back({Layer(i, "self_attn.o_proj.weight"), {c.hidden_size, q_dim}});
    if (c.attention_bias) {
      specs.push_back({Layer(i, "self_attn.q_proj.bias"), {q_dim}});
      specs.push_back({Layer(i, "self_attn.k_proj.bias"), {kv_dim}});
      specs.push_back({Layer(i, "self_attn.v_proj.bias"), {kv_dim}});
    }
    if (c.attention_output_bias) specs.push_back({Layer(i, "self_attn.o_proj.bias"), {c.hidden_size}});
    if (c.qk_norm) {
      specs.push_back({Layer(i, "self_attn.q_norm.weight"), {c.head_dim}});
      specs.push_back({Layer(i, "self_attn.k_norm.weight"), {c.head_dim}});
    }
    specs.push_back({Layer(i, "post_attention_layernorm.weight"), {c.hidden_size}});
    if (c.gemma_norms) {
      specs.push_back({Layer(i, "pre_feedforward_layernorm.weight"), {c.hidden_size}});
      specs.push_back({Layer(i, "post_feedforward_layernorm.weight"), {c.hidden_size}});
    }
    if (c.LayerIsMoe(i)) {
      const int64_t ff = c.expert_intermediate_size;
      specs.push_back({Layer(i, "mlp.gate.weight"), {c.num_experts, c.hidden_size}});
      for (int64_t e = 0; e < c.num_experts; ++e) {
        specs.push_back({Layer(i, ExpertSuffix(e, "gate_proj")), {ff, c.hidden_size}});
        specs.push_back({Layer(i, ExpertSuffix(e, "up_proj")), {ff, c.hidden_size}});
        specs.push_back({Layer(i, ExpertSuffix(e, "down_proj")), {c.hidden_size, ff}});
      }
      if (c.shared_expert_intermediate_size > 0) {
        const int64_t sf = c.shared_expert_intermediate_size;
        specs.push_back({Layer(i, "mlp.shared_expert.gate_proj.weight"), {sf, c.hidden_size}});
        specs.push_back({Layer(i, "mlp.shared_expert.up_proj.weight"), {sf, c.hidden_size}});
        specs.push_back({Layer(i, "mlp.shared_expert.down_proj.weight"), {c.hidden_size, sf}});
        specs.push_back({Layer(i, "mlp.shared_expert_gate.weight"), {1, c.hidden_size}});
      }
      continue;
    }
    specs.push_back({Layer(i, "mlp.gate_proj.weight"), {c.intermediate_size, c.hidden_size}});
    specs.push_back({Layer(i, "mlp.up_proj.weight"), {c.intermediate_size, c.hidden_size}});
    specs.push_back({Layer(i, "mlp.down_proj.weight"), {c.hidden_size, c.intermediate_size}});
  }
  specs.push_back({weight_names::FinalNorm(), {c.hidden_size}});
  if (!c.tie_word_embeddings) specs.push_back({weight_names::LmHead(), {c.vocab_size, c.hidden_size}});
  return specs;
}

int64_t Weight::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

WeightStore::~WeightStore() = default;

Expected<std::unique_ptr<WeightStore>> WeightStore::Open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return OpenHuggingFace(path);
  if (!fs::exists(path, ec)) return NotFound("{}: no such file or folder", path);
  fs::path p(path);
  // A file of a Hugging Face folder stands for the folder.
  if (p.extension() == ".safetensors" || p.filename() == "config.json" ||
      p.filename() == "model.safetensors.index.json") {
    return OpenHuggingFace(p.has_parent_path() ? p.parent_path().string() : ".");
  }
  return OpenGguf(path);
}

Expected<std::unique_ptr<WeightStore>> WeightStore::Dummy(const ModelConfig& config, DType dtype,
                                                          uint64_t seed) {
  KILN_RETURN_IF_ERROR(config.Validate().WithContext("dummy weights"));
  if (!CanQuantizeTo(dtype)) {
    return Unsupported("dummy weights: dtype {} (the types kiln quantize writes are supported)",
                       DTypeName(dtype));
  }
  auto store = std::make_unique<LoadedWeightStore>(fmt::format("dummy:{}", ArchitectureName(config.arch)),
                                                   ModelFormat::kDummy);
  store->mutable_config() = config;
  std::vector<WeightSpec> specs = RequiredWeights(config);
  struct Layout {
    DType stored;
    int64_t row, rows;
    uint64_t row_bytes, offset;
  };
  std::vector<Layout> layouts;
  uint64_t total = 0;
  constexpr uint64_t kPage = 4096;  // each tensor on whole pages, so its pages can be dropped alone
  for (const WeightSpec& spec : specs) {
    // Vectors (norms, biases) stay f32 beside block-quantized matrices, as in GGUF files.
    DType stored = spec.shape.size() == 1 && IsQuantized(dtype) ? DType::kF32 : dtype;
    int64_t row = spec.shape.back();
    int64_t rows = spec.shape.size() == 1 ? 1 : spec.shape[0];
    if (row % DTypeBlockSize(stored) != 0) {
      return InvalidArgument("dummy weights: tensor {} rows of {} are not a multiple of {}'s block size {}",
                             spec.name, row, DTypeName(stored), DTypeBlockSize(stored));
    }
    uint64_t row_bytes = *DTypeBytes(stored, static_cast<uint64_t>(row));
    layouts.push_back({stored, row, rows, row_bytes, total});
    total += (row_bytes * static_cast<uint64_t>(rows) + kPage - 1) / kPage * kPage;
  }
  // Weights that take more than half of the memory available could not be
  // held twice, rows and a backend's repacked copy: they are generated into
  // a scratch file, as if read from one, so that the backend may drop the
  // rows it copied. Where that fails they stay in memory (and a backend
  // keeps such rows as its only copy).
  std::shared_ptr<uint8_t> scratch;
  if (const int64_t available = AvailableMemoryBytes();
      available > 0 && total > static_cast<uint64_t>(available) / 2) {
    if (auto mapped = MapScratchFile(total); mapped.ok()) {
      scratch = *std::move(mapped);
    } else {
      KILN_LOG_WARN("dummy weights: {} bytes stay in memory, beside any repacked copy: {}", total,
                    mapped.status().ToString());
    }
  }
  if (scratch) store->Own(scratch);
  for (size_t index = 0; index < specs.size(); ++index) {
    const WeightSpec& spec = specs[index];
    const auto [stored, row, rows, row_bytes, offset] = layouts[index];
    uint64_t nbytes = row_bytes * static_cast<uint64_t>(rows);
    std::shared_ptr<void> buffer =
        scratch ? std::shared_ptr<void>(scratch, scratch.get() + offset) : AlignedBuffer(nbytes);
    if (!buffer) {
      return ResourceExhausted("dummy weights: cannot allocate {} bytes for {}", nbytes, spec.name);
    }

    bool is_norm = spec.name.find("norm") != std::string::npos;
    // A router of near-zero weights would choose its experts by noise;
    // larger ones give the peaked choices of a trained model.
    bool is_router = std::string_view(spec.name).ends_with(".mlp.gate.weight");
    uint64_t state = seed * 0x100000001b3ull + index;
    std::vector<float> values(static_cast<size_t>(row));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : values) v = is_norm ? 1.0f : NormalLike(state, is_router ? 0.5f : 0.02f);
      uint8_t* dst = static_cast<uint8_t*>(buffer.get()) + static_cast<uint64_t>(r) * row_bytes;
      KILN_RETURN_IF_ERROR(QuantizeRowRef(stored, values.data(), dst, row));
    }
    Weight w;
    w.name = spec.name;
    w.source_name = spec.name;
    w.file = store->path();
    w.dtype = stored;
    w.file_dtype = stored;
    w.shape = spec.shape;
    w.data = static_cast<const uint8_t*>(buffer.get());
    w.nbytes = nbytes;
    w.file_mapped = scratch != nullptr;
    store->Own(std::move(buffer));
    store->mutable_weights().push_back(std::move(w));
  }
  KILN_RETURN_IF_ERROR(store->Finish(store->path()));
  return std::unique_ptr<WeightStore>(std::move(store));
}

Expected<std::unique_ptr<WeightStore>> WeightStore::Requantized(const WeightStore& source, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 && dtype != DType::kQ8_0 &&
      dtype != DType::kQ4_0) {
    return Unsupported("requantized weights: dtype {} (f32, f16, bf16, q8_0 and q4_0 are supported)",
                       DTypeName(dtype));
  }
  const std::string path = fmt::format("{} as {}", source.path(), DTypeName(dtype));
  auto store = std::make_unique<LoadedWeightStore>(path, source.format());
  store->mutable_config() = source.config();
  for (const Weight& from : source.weights()) {
    const int64_t row = from.shape.empty() ? 1 : from.shape.back();
    const bool convert = from.shape.size() >= 2 && row % DTypeBlockSize(dtype) == 0;
    const DType stored = convert ? dtype : from.dtype;
    const int64_t rows = row > 0 ? from.num_elements() / row : 0;
    const uint64_t nbytes =
        convert ? *DTypeBytes(stored, static_cast<uint64_t>(row)) * static_cast<uint64_t>(rows) : from.nbytes;
    auto buffer = AlignedBuffer(std::max<uint64_t>(nbytes, 1));
    if (!buffer) return ResourceExhausted("{}: cannot allocate {} bytes for {}", path, nbytes, from.name);
    auto* dst = static_cast<uint8_t*>(buffer.get());
    if (!convert) {
      std::memcpy(dst, from.data, from.nbytes);
    } else {
      // Row by row, so that a large embedding never needs a float copy of
      // its own.
      const uint64_t from_row_bytes = *DTypeBytes(from.dtype, static_cast<uint64_t>(row));
      const uint64_t to_row_bytes = nbytes / static_cast<uint64_t>(rows);
      std::vector<float> values(static_cast<size_t>(row));
      for (int64_t r = 0; r < rows; ++r) {
        Status s = DequantizeRow(from.dtype, from.data + static_cast<uint64_t>(r) * from_row_bytes,
                                 values.data(), row);
        if (!s.ok()) return s.WithContext(fmt::format("{}: tensor {}", source.path(), from.name));
        for (float v : values) {
          if (!std::isfinite(v)) {
            return InvalidArgument("{}: tensor {} row {} holds a non-finite value", source.path(), from.name,
                                   r);
          }
        }
        KILN_RETURN_IF_ERROR(
            QuantizeRowRef(stored, values.data(), dst + static_cast<uint64_t>(r) * to_row_bytes, row));
      }
    }
    Weight w = from;
    w.file = path;
    w.dtype = stored;
    w.file_dtype = stored;
    w.data = dst;
    w.nbytes = nbytes;
    w.file_mapped = false;
    store->Own(std::move(buffer));
    store->mutable_weights().push_back(std::move(w));
  }
  KILN_RETURN_IF_ERROR(store->Finish(path));
  return std::unique_ptr<WeightStore>(std::move(store));
}

const Weight* WeightStore::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &weights_[it->second];
}

Expected<const Weight*> WeightStore::Require(std::string_view name) const {
  const Weight* w = Find(name);
  if (w == nullptr) return NotFound("{}: no tensor {}", path_, name);
  return w;
}

Expected<std::vector<float>> WeightStore::ReadF32(std::string_view name) const {
  KILN_ASSIGN_OR_RETURN(const Weight* w, Require(name));
  std::vector<float> out(static_cast<size_t>(w->num_elements()));
  Status s = DequantizeRow(w->dtype, w->data, out.data(), w->num_elements());
  if (!s.ok()) return s.WithContext(fmt::format("{}: tensor {}", w->file, w->source_name));
  return out;
}

int64_t WeightStore::TotalBytes() const {
  int64_t total = 0;
  for (const Weight& w : weights_) total += static_cast<int64_t>(w.nbytes);
  return total;
}

namespace weight_names {

std::string Embedding() {
  return "model.embed_tokens.weight";
}
std::string FinalNorm() {
  return "model.norm.weight";
}
std::string LmHead() {
  return "lm_head.weight";
}
std::string Layer(int64_t layer, std::string_view suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}
std::string ExpertSuffix(int64_t expert, std::string_view projection) {
  return fmt::format("mlp.experts.{}.{}.weight", expert, projection);
}

std::string FromGguf(std::string_view gguf_name) {
  std::string layer;
  std::string_view rest;
  if (SplitLayer(gguf_name, "blk.", &layer, &rest)) {
    if (auto hf = MapBase(rest, kLayerNames, std::size(kLayerNames), true)) {
      return fmt::format("model.layers.{}.{}", layer, *hf);
    }
    return std::string(gguf_name);
  }
  if (auto hf = MapBase(gguf_name, kGlobalNames, std::size(kGlobalNames), true)) return *hf;
  return std::string(gguf_name);
}

std::string ToGgufFor(const std::string& canonical_name, const ModelConfig& config) {
  return MapGgufName(canonical_name, config, false);
}

std::string ToGguf(std::string_view canonical_name) {
  std::string layer;
  std::string_view rest;
  if (SplitLayer(canonical_name, "model.layers.", &layer, &rest)) {
    if (auto gguf = MapBase(rest, kLayerNames, std::size(kLayerNames), false)) {
      return fmt::format("blk.{}.{}", layer, *gguf);
    }
    return std::string(canonical_name);
  }
  if (auto gguf = MapBase(canonical_name, kGlobalNames, std::size(kGlobalNames), false)) return *gguf;
  return std::string(canonical_name);
}

}  // namespace weight_names

}  // namespace kiln
