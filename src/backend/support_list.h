// A backend's support list: which ops it runs, with which activation and
// weight dtypes, in which weight layout, within which shape limits. It is
// data, so that `kiln backends` can print it and legalize can match nodes
// against it and say exactly why a node does not fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "graph/graph.h"

namespace kiln {

struct SupportEntry {
  OpKind op = OpKind::kAdd;
  // kTensorOp: the tensor op's name ("Conv"); activation_dtypes then
  // lists the dtypes accepted for its first input (empty: any).
  std::string op_type;
  std::vector<DType> activation_dtypes;  // accepted dtypes of the op's inputs
  std::vector<DType> weight_dtypes;      // accepted weight dtypes (ops with weights)
  std::string weight_layout;             // the layout weights are packed into, or ""
  int64_t max_cols = 0;                  // largest output width (0: no limit)
  int64_t max_head_dim = 0;              // attention and RoPE (0: no limit)
  int64_t max_rank = 0;                  // tensor ops: the largest rank of any input or output (0: no limit)
  bool sliding_window = true;            // attention: supports a window
  bool softcap = true;                   // attention: supports soft-capped scores (Gemma 2)
  bool embedding_scale = true;           // embedding: supports scaled rows (Gemma)
  // Tensor ops: the layout the backend's kernel indexes its 4-d
  // activations in (the layout stage reorders at its borders).
  TensorLayout activation_layout = TensorLayout::kRowMajor;
  std::string note;
};

class SupportList {
 public:
  SupportList() = default;
  explicit SupportList(std::vector<SupportEntry> entries) : entries_(std::move(entries)) {}

  void Add(SupportEntry e) { entries_.push_back(std::move(e)); }
  const std::vector<SupportEntry>& entries() const { return entries_; }

  // The entry that supports `node` in `g`, or nullptr; `why_not` (if given)
  // says what failed for the closest entry ("weight dtype q4_k not in [f32]").
  const SupportEntry* Match(const Graph& g, const Node& node, std::string* why_not = nullptr) const;
  bool Supports(OpKind op) const;
  // kTensorOp entries: whether op_type is listed.
  bool SupportsTensorOp(const std::string& op_type) const;

  // A table, one line per entry.
  std::string ToString() const;

 private:
  std::vector<SupportEntry> entries_;
};

}  // namespace kiln
