// The activations kiln.FusedConv applies to its output (attribute
// `activation`, with `activation_alpha` / `activation_beta`), parsed once
// for shape inference and the kernels alike.
#pragma once

#include <string_view>

#include "core/status.h"
#include "graph/attribute_map.h"

namespace kiln {

enum class FusedActivation {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kHardSigmoid,
  kHardSwish,
  kSilu,
  kSigmoid,
  kTanh
};

struct FusedEpilogue {
  FusedActivation activation = FusedActivation::kNone;
  float alpha = 0.0f;  // LeakyRelu slope, Clip min, HardSigmoid alpha
  float beta = 0.0f;   // Clip max, HardSigmoid beta
  bool residual_before_activation = false;
};

// The epilogue a node's attributes ask for; an unknown activation is an
// error naming op and node. Defaults follow ONNX (LeakyRelu 0.01,
// HardSigmoid 0.2 / 0.5, Clip unbounded).
Expected<FusedEpilogue> ParseFusedEpilogue(std::string_view op, std::string_view node,
                                           const AttributeMap& attrs);

// The activation on one value (the reference every vector path matches).
float ApplyFusedActivation(const FusedEpilogue& e, float x);

}  // namespace kiln
