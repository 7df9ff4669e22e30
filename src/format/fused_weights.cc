// Row slices of Phi-3's fused q/k/v and gate/up tensors.
#include "format/fused_weights.h"

#include <string_view>

#include <fmt/format.h>

namespace kiln {
namespace {

struct Part {
  const char* suffix;  // replaces the fused tensor's "<base>.weight"
  int64_t rows;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The parts of `w`, one after another, as weights sharing its data.
Status AppendParts(const Weight& w, std::string_view fused_suffix, const std::vector<Part>& parts,
                   std::vector<Weight>* out) {
  int64_t total = 0;
  for (const Part& p : parts) total += p.rows;
  if (w.shape.size() != 2 || w.shape[0] != total) {
    return Corrupt("{}: tensor {} has shape [{}], the config implies {} rows", w.file, w.source_name,
                   fmt::join(w.shape, ", "), total);
  }
  if (w.nbytes % static_cast<uint64_t>(total) != 0) {
    return Corrupt("{}: tensor {}: {} bytes do not divide into {} rows", w.file, w.source_name, w.nbytes,
                   total);
  }
  const uint64_t row_bytes = w.nbytes / static_cast<uint64_t>(total);
  const std::string prefix = w.name.substr(0, w.name.size() - fused_suffix.size());
  int64_t first = 0;
  for (const Part& p : parts) {
    Weight part = w;
    part.name = prefix + p.suffix;
    part.shape = {p.rows, w.shape[1]};
    part.data = w.data + static_cast<uint64_t>(first) * row_bytes;
    part.nbytes = static_cast<uint64_t>(p.rows) * row_bytes;
    out->push_back(std::move(part));
    first += p.rows;
  }
  return Status::Ok();
}

}  // namespace

Status SplitFusedWeights(const ModelConfig& c, std::vector<Weight>* weights) {
  if (c.arch != Architecture::kPhi3) return Status::Ok();
  constexpr std::string_view kQkv = "self_attn.qkv_proj.weight";
  constexpr std::string_view kGateUp = "mlp.gate_up_proj.weight";
  // GGUF's ffn_up maps to up_proj, but Phi-3's holds gate and up.
  constexpr std::string_view kUp = "mlp.up_proj.weight";
  const std::vector<Part> qkv = {{"self_attn.q_proj.weight", c.num_heads * c.head_dim},
                                 {"self_attn.k_proj.weight", c.num_kv_heads * c.head_dim},
                                 {"self_attn.v_proj.weight", c.num_kv_heads * c.head_dim}};
  const std::vector<Part> gate_up = {{"mlp.gate_proj.weight", c.intermediate_size},
                                     {"mlp.up_proj.weight", c.intermediate_size}};
  std::vector<Weight> out;
  out.reserve(weights->size() + 3 * static_cast<size_t>(c.num_layers));
  for (Weight& w : *weights) {
    if (EndsWith(w.name, kQkv)) {
      KILN_RETURN_IF_ERROR(AppendParts(w, kQkv, qkv, &out));
    } else if (EndsWith(w.name, kGateUp)) {
      KILN_RETURN_IF_ERROR(AppendParts(w, kGateUp, gate_up, &out));
    } else if (EndsWith(w.name, kUp) && w.shape.size() == 2 && w.shape[0] == 2 * c.intermediate_size) {
      KILN_RETURN_IF_ERROR(AppendParts(w, kUp, gate_up, &out));
    } else {
      out.push_back(std::move(w));
    }
  }
  *weights = std::move(out);
  return Status::Ok();
}

}  // namespace kiln
