// The CPU backend's packed weights, as PackWeight makes them and the linear
// binders read them: fp32/f16/bf16 panels, or block-quantized rows.
// (W8A8's int8 panels are w8a8/w8a8_bind.h's W8A8Matrix.)
#pragma once

#include <string>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "backend/cpu/qkernels/quant_matrix.h"

namespace kiln::cpu {

// A float weight in 16-column panels.
class PanelMatrix : public PackedMatrix {
 public:
  explicit PanelMatrix(PackedWeight w) : w_(std::move(w)) {}
  std::string layout() const override { return fmt::format("panel16-{}", DTypeName(w_.dtype())); }
  size_t bytes() const override { return w_.bytes(); }
  Expected<std::map<std::string, std::span<const uint8_t>>> StoredParts() const override {
    return std::map<std::string, std::span<const uint8_t>>{
        {"panels", {static_cast<const uint8_t*>(w_.data()), w_.bytes()}}};
  }
  const PackedWeight& weight() const { return w_; }

 private:
  PackedWeight w_;
};

// A block-quantized matrix: the file's bytes read in place by the quantized
// kernels, or (the types with an x8 layout, HasX8Layout) a copy repacked
// for them at load.
class BlockQuantMatrix : public PackedMatrix {
 public:
  explicit BlockQuantMatrix(QuantMatrix w) : w_(std::move(w)) {}
  std::string layout() const override { return w_.layout(); }
  size_t bytes() const override { return w_.kernel_bytes(); }
  bool in_place() const override { return w_.x8() == nullptr; }
  // The rows are the weight's own bytes; only the x8 copy is stored.
  Expected<std::map<std::string, std::span<const uint8_t>>> StoredParts() const override {
    std::map<std::string, std::span<const uint8_t>> parts;
    if (w_.x8() != nullptr) parts["x8"] = {w_.x8(), w_.kernel_bytes()};
    return parts;
  }
  const QuantMatrix& weight() const { return w_; }

 private:
  QuantMatrix w_;
};

// `m` as a panel matrix, or null when it is packed otherwise.
inline const PanelMatrix* AsPanel(const PackedMatrix* m) { return dynamic_cast<const PanelMatrix*>(m); }
// `m` as a block-quantized matrix, or null when it is packed otherwise.
inline const BlockQuantMatrix* AsBlockQuant(const PackedMatrix* m) {
  return dynamic_cast<const BlockQuantMatrix*>(m);
}

}  // namespace kiln::cpu
