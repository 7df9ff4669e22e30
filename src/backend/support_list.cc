// Matching nodes against support entries.
#include "backend/support_list.h"

#include <algorithm>

#include <fmt/format.h>

#include "format/weight_store.h"

namespace kiln {
namespace {

std::string DTypeList(const std::vector<DType>& ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : ",") + std::string(DTypeName(d));
  return s.empty() ? "-" : s;
}

bool Contains(const std::vector<DType>& ds, DType d) { return std::find(ds.begin(), ds.end(), d) != ds.end(); }

// Why `e` does not support `node`, or "" when it does.
std::string Mismatch(const SupportEntry& e, const Graph& g, const Node& node) {
  if (node.op == OpKind::kTensorOp) {
    if (e.max_rank > 0) {
      for (const auto* ids : {&node.inputs, &node.outputs}) {
        for (ValueId v : *ids) {
          if (v != kNoValue && static_cast<int64_t>(g.value(v).dims.size()) > e.max_rank) {
            return fmt::format("rank {} beyond limit {}", g.value(v).dims.size(), e.max_rank);
          }
        }
      }
    }
    if (e.activation_dtypes.empty() || node.inputs.empty() || node.inputs[0] == kNoValue) return "";
    const DType d = g.value(node.inputs[0]).dtype;
    if (!Contains(e.activation_dtypes, d)) {
      return fmt::format("input dtype {} not in [{}]", DTypeName(d), DTypeList(e.activation_dtypes));
    }
    return "";
  }
  for (ValueId in : node.inputs) {
    const Value& v = g.value(in);
    if (v.is_marker()) continue;
    if (!Contains(e.activation_dtypes, v.dtype)) {
      return fmt::format("input dtype {} not in [{}]", DTypeName(v.dtype), DTypeList(e.activation_dtypes));
    }
  }
  for (const Weight* w : node.weights) {
    if (w == nullptr || w->shape.size() != 2) continue;  // vectors (norms, biases) go with the op
    if (!Contains(e.weight_dtypes, w->dtype)) {
      return fmt::format("weight {} dtype {} not in [{}]", w->name, DTypeName(w->dtype), DTypeList(e.weight_dtypes));
    }
  }
  if (e.max_cols > 0) {
    for (ValueId out : node.outputs) {
      if (g.value(out).cols > e.max_cols) {
        return fmt::format("output width {} beyond limit {}", g.value(out).cols, e.max_cols);
      }
    }
  }
  if (e.max_head_dim > 0 && node.attrs.head_dim > e.max_head_dim) {
    return fmt::format("head_dim {} beyond limit {}", node.attrs.head_dim, e.max_head_dim);
  }
  if (!e.sliding_window && node.attrs.sliding_window > 0) return "sliding-window attention not supported";
  const bool attention = node.op == OpKind::kAttention || node.op == OpKind::kMaskedSoftmax;
  if (!e.softcap && attention && node.attrs.softcap > 0) return "soft-capped attention not supported";
  if (!e.embedding_scale && node.op == OpKind::kEmbedding && node.attrs.scale != 0) {
    return "scaled embeddings not supported";
  }
  return "";
}

}  // namespace

const SupportEntry* SupportList::Match(const Graph& g, const Node& node, std::string* why_not) const {
  std::string first_reason;
  for (const SupportEntry& e : entries_) {
    if (e.op != node.op) continue;
    if (node.op == OpKind::kTensorOp && e.op_type != node.op_type) continue;
    std::string reason = Mismatch(e, g, node);
    if (reason.empty()) return &e;
    if (first_reason.empty()) first_reason = reason;
  }
  if (why_not != nullptr) *why_not = first_reason.empty() ? "op not in the support list" : first_reason;
  return nullptr;
}

bool SupportList::Supports(OpKind op) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const SupportEntry& e) { return e.op == op; });
}

bool SupportList::SupportsTensorOp(const std::string& op_type) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const SupportEntry& e) { return e.op == OpKind::kTensorOp && e.op_type == op_type; });
}

std::string SupportList::ToString() const {
  std::string s = fmt::format("  {:<18} {:<18} {:<40} {:<10} {}\n", "op", "activations", "weights", "layout", "limits");
  for (const SupportEntry& e : entries_) {
    std::string limits;
    if (e.max_cols > 0) limits += fmt::format("cols<={} ", e.max_cols);
    if (e.max_head_dim > 0) limits += fmt::format("head_dim<={} ", e.max_head_dim);
    if (!e.sliding_window) limits += "no-window ";
    if (!e.softcap && (e.op == OpKind::kAttention || e.op == OpKind::kMaskedSoftmax)) limits += "no-softcap ";
    if (!e.embedding_scale && e.op == OpKind::kEmbedding) limits += "no-scale ";
    if (!e.note.empty()) limits += e.note;
    const std::string op = e.op == OpKind::kTensorOp ? e.op_type : OpName(e.op);
    s += fmt::format("  {:<18} {:<18} {:<40} {:<10} {}\n", op, DTypeList(e.activation_dtypes),
                     e.weight_dtypes.empty() ? "-" : DTypeList(e.weight_dtypes),
                     e.weight_layout.empty() ? "-" : e.weight_layout, limits.empty() ? "-" : limits);
  }
  return s;
}

}  // namespace kiln
