// W8A8 in the CPU backend: which weights it takes, their int8 packing, and
// the kernel call of a linear (or gate_up_silu_mul) node whose weights are
// all W8A8-packed. CpuBackend::PackWeight packs here when the compiler asks
// for int8; the linear binder binds such a node here.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/w8a8/int8_gemm.h"
#include "backend/cpu/w8a8/int8_weight.h"

namespace kiln {
struct Weight;
}

namespace kiln::cpu {

// Whether W8A8 takes `w`: the matrices of the decoder layers (attention and
// MLP projections). The embedding table and the output head keep their type.
bool W8A8Applies(const Weight& w);

// A weight packed for the int8 GEMM, with the clip of its input (0: dynamic).
class W8A8Matrix : public PackedMatrix {
 public:
  W8A8Matrix(Int8Weight w, float input_clip) : w_(std::move(w)), input_clip_(input_clip) {}
  std::string layout() const override;
  size_t bytes() const override { return w_.bytes(); }
  const Int8Weight& weight() const { return w_; }
  float input_clip() const { return input_clip_; }

 private:
  Int8Weight w_;
  float input_clip_;
};

// Quantizes `w` ([out, in], any dtype DequantizeRow reads) to int8 per
// output channel. Errors name the weight.
Expected<std::shared_ptr<const PackedMatrix>> PackW8A8Matrix(const Weight& w, float input_clip);

// `m` as a W8A8 matrix, or null when it is packed otherwise.
const W8A8Matrix* AsW8A8(const PackedMatrix* m);

// Whether every matrix of ctx.node is W8A8-packed (then BindW8A8Linear binds it).
bool IsW8A8Node(const BindContext& ctx);

// The kernel call of a linear or gate_up_silu_mul node with W8A8 weights:
// the input rows are quantized once per pass (with the largest static clip
// among the node's weights, which share the input, else per token), then
// each weight's int8 GEMM writes its columns. `step` carries the name, op
// and backend. Errors when shapes or dtypes do not fit.
Expected<Step> BindW8A8Linear(const BindContext& ctx, Step step);

}  // namespace kiln::cpu
