// Renaming Mixtral's experts and cutting GGUF's stacked expert tensors.
#include "format/expert_weights.h"

#include <string_view>

#include <fmt/format.h>

namespace kiln {
namespace {

// "<head><from><tail>" -> "<head><to><tail>" when `name` holds `from`.
bool Replace(std::string& name, std::string_view from, std::string_view to) {
  size_t at = name.find(from);
  if (at == std::string::npos) return false;
  name.replace(at, from.size(), to);
  return true;
}

struct Stacked {
  const char* gguf_suffix;  // the canonical name FromGguf leaves unmapped ends in it
  const char* projection;
};
constexpr Stacked kStacked[] = {
    {".ffn_gate_exps.weight", "gate_proj"},
    {".ffn_up_exps.weight", "up_proj"},
    {".ffn_down_exps.weight", "down_proj"},
};

// Older Mixtral GGUF files hold each expert as its own matrix,
// blk.N.ffn_{gate,up,down}.E.weight.
void RenameOlderMixtralExpert(Weight& w) {
  std::string_view name = w.source_name;
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return;
  const size_t layer_end = name.find('.', 4);
  if (layer_end == std::string_view::npos) return;
  std::string_view rest = name.substr(layer_end + 1, name.size() - layer_end - 1 - 7);  // "ffn_gate.3"
  for (const char* projection : {"gate", "up", "down"}) {
    const std::string prefix = fmt::format("ffn_{}.", projection);
    if (!rest.starts_with(prefix)) continue;
    std::string_view expert = rest.substr(prefix.size());
    if (expert.empty() || expert.find_first_not_of("0123456789") != std::string_view::npos) return;
    w.name = fmt::format("model.layers.{}.mlp.experts.{}.{}_proj.weight", name.substr(4, layer_end - 4), expert,
                         projection);
    return;
  }
}

}  // namespace

void RenameMixtralWeights(const ModelConfig& c, std::vector<Weight>* weights) {
  if (c.arch != Architecture::kMixtral) return;
  for (Weight& w : *weights) {
    if (!Replace(w.name, ".block_sparse_moe.", ".mlp.")) continue;
    Replace(w.name, ".w1.weight", ".gate_proj.weight") || Replace(w.name, ".w3.weight", ".up_proj.weight") ||
        Replace(w.name, ".w2.weight", ".down_proj.weight");
  }
}

Status SplitStackedExperts(const ModelConfig& c, std::vector<Weight>* weights) {
  if (c.num_experts == 0) return Status::Ok();
  std::vector<Weight> out;
  out.reserve(weights->size() + 3 * static_cast<size_t>(c.num_layers * c.num_experts));
  for (Weight& w : *weights) {
    std::string_view name = w.source_name;
    const Stacked* stacked = nullptr;
    for (const Stacked& s : kStacked) {
      if (name.starts_with("blk.") && name.ends_with(s.gguf_suffix)) stacked = &s;
    }
    if (std::string_view(w.name).ends_with(".mlp.shared_expert_gate.weight") && w.shape.size() == 1) {
      w.shape = {1, w.shape[0]};
    }
    if (stacked == nullptr) {
      RenameOlderMixtralExpert(w);
      out.push_back(std::move(w));
      continue;
    }
    if (w.shape.size() != 3 || w.shape[0] != c.num_experts) {
      return Corrupt("{}: tensor {} has shape [{}], the config implies {} experts outermost", w.file,
                     w.source_name, fmt::join(w.shape, ", "), c.num_experts);
    }
    if (w.nbytes % static_cast<uint64_t>(c.num_experts) != 0) {
      return Corrupt("{}: tensor {}: {} bytes do not divide into {} experts", w.file, w.source_name, w.nbytes,
                     c.num_experts);
    }
    const std::string layer(name.substr(4, name.size() - 4 - std::string_view(stacked->gguf_suffix).size()));
    const uint64_t expert_bytes = w.nbytes / static_cast<uint64_t>(c.num_experts);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      Weight part = w;
      part.name = fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", layer, e, stacked->projection);
      part.source_name = fmt::format("{} (expert {})", w.source_name, e);
      part.shape = {w.shape[1], w.shape[2]};
      part.data = w.data + static_cast<uint64_t>(e) * expert_bytes;
      part.nbytes = expert_bytes;
      out.push_back(std::move(part));
    }
  }
  *weights = std::move(out);
  return Status::Ok();
}

}  // namespace kiln
