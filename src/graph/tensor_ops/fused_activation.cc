// The fused activations' names, parameters and scalar definitions.
#include "graph/tensor_ops/fused_activation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "graph/tensor_ops/conv_geometry.h"

namespace kiln {

Expected<FusedEpilogue> ParseFusedEpilogue(std::string_view op, std::string_view node,
                                           const AttributeMap& attrs) {
  FusedEpilogue e;
  e.residual_before_activation = IntAttrOr(attrs, "residual_before_activation", 0) != 0;
  if (!attrs.Has("activation")) return e;
  auto name = attrs.String("activation");
  if (!name.ok()) return InvalidArgument("{} {}: {}", op, node, name.status().message());
  const std::string& a = *name;
  const bool has_alpha = attrs.Has("activation_alpha");
  const bool has_beta = attrs.Has("activation_beta");
  const float alpha = static_cast<float>(FloatAttrOr(attrs, "activation_alpha", 0.0));
  const float beta = static_cast<float>(FloatAttrOr(attrs, "activation_beta", 0.0));
  if (a.empty() || a == "None" || a == "Identity") {
    e.activation = FusedActivation::kNone;
  } else if (a == "Relu") {
    e.activation = FusedActivation::kRelu;
  } else if (a == "LeakyRelu") {
    e.activation = FusedActivation::kLeakyRelu;
    e.alpha = has_alpha ? alpha : 0.01f;
  } else if (a == "Clip") {
    e.activation = FusedActivation::kClip;
    e.alpha = has_alpha ? alpha : -std::numeric_limits<float>::infinity();
    e.beta = has_beta ? beta : std::numeric_limits<float>::infinity();
  } else if (a == "HardSigmoid") {
    e.activation = FusedActivation::kHardSigmoid;
    e.alpha = has_alpha ? alpha : 0.2f;
    e.beta = has_beta ? beta : 0.5f;
  } else if (a == "HardSwish") {
    e.activation = FusedActivation::kHardSwish;
  } else if (a == "Silu" || a == "Swish") {
    e.activation = FusedActivation::kSilu;
  } else if (a == "Sigmoid") {
    e.activation = FusedActivation::kSigmoid;
  } else if (a == "Tanh") {
    e.activation = FusedActivation::kTanh;
  } else {
    return Unsupported(
        "{} {}: activation '{}' is none of Relu, LeakyRelu, Clip, HardSigmoid, HardSwish, Silu, "
        "Sigmoid, Tanh",
        op, node, a);
  }
  return e;
}

float ApplyFusedActivation(const FusedEpilogue& e, float x) {
  switch (e.activation) {
    case FusedActivation::kNone: return x;
    case FusedActivation::kRelu: return std::max(x, 0.0f);
    case FusedActivation::kLeakyRelu: return x >= 0.0f ? x : x * e.alpha;
    case FusedActivation::kClip: return std::min(std::max(x, e.alpha), e.beta);
    case FusedActivation::kHardSigmoid: return std::min(std::max(e.alpha * x + e.beta, 0.0f), 1.0f);
    case FusedActivation::kHardSwish: return x * std::min(std::max(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case FusedActivation::kSilu: return x / (1.0f + std::exp(-x));
    case FusedActivation::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case FusedActivation::kTanh: return std::tanh(x);
  }
  return x;
}

}  // namespace kiln
