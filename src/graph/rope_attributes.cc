// The "rope.*" node attributes.
#include "graph/rope_attributes.h"

namespace kiln {
namespace {

const char* ScalingName(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLongRope: return "longrope";
  }
  return "?";
}

Expected<RopeScalingType> ScalingFromName(const std::string& name) {
  for (RopeScalingType t : {RopeScalingType::kNone, RopeScalingType::kLinear, RopeScalingType::kLlama3,
                            RopeScalingType::kYarn, RopeScalingType::kLongRope}) {
    if (name == ScalingName(t)) return t;
  }
  return InvalidArgument("attribute 'rope.scaling' is '{}', expected none, linear, llama3, yarn or longrope",
                         name);
}

}  // namespace

void SetRopeAttributes(const RopeParameters& p, AttributeMap* attrs) {
  attrs->SetInt("rope.rotary_dim", p.rotary_dim);
  attrs->SetFloat("rope.theta", p.theta);
  const RopeScaling& s = p.scaling;
  attrs->SetString("rope.scaling", ScalingName(s.type));
  attrs->SetFloat("rope.factor", s.factor);
  attrs->SetFloat("rope.low_freq_factor", s.low_freq_factor);
  attrs->SetFloat("rope.high_freq_factor", s.high_freq_factor);
  attrs->SetInt("rope.original_max_position_embeddings", s.original_max_position_embeddings);
  attrs->SetFloat("rope.beta_fast", s.beta_fast);
  attrs->SetFloat("rope.beta_slow", s.beta_slow);
  attrs->SetFloat("rope.attention_factor", s.attention_factor);
  // Only longrope has them; other nodes keep the attributes they had.
  if (s.type == RopeScalingType::kLongRope) {
    attrs->SetFloats("rope.short_factor", s.short_factor);
    attrs->SetFloats("rope.long_factor", s.long_factor);
  }
}

Expected<RopeParameters> RopeAttributes(const AttributeMap& attrs) {
  RopeParameters p;
  KILN_ASSIGN_OR_RETURN(p.rotary_dim, attrs.Int("rope.rotary_dim"));
  KILN_ASSIGN_OR_RETURN(p.theta, attrs.Float("rope.theta"));
  RopeScaling& s = p.scaling;
  const Expected<std::string> type = attrs.String("rope.scaling");
  if (!type.ok()) return type.status();
  KILN_ASSIGN_OR_RETURN(s.type, ScalingFromName(*type));
  KILN_ASSIGN_OR_RETURN(s.factor, attrs.Float("rope.factor"));
  KILN_ASSIGN_OR_RETURN(s.low_freq_factor, attrs.Float("rope.low_freq_factor"));
  KILN_ASSIGN_OR_RETURN(s.high_freq_factor, attrs.Float("rope.high_freq_factor"));
  KILN_ASSIGN_OR_RETURN(s.original_max_position_embeddings, attrs.Int("rope.original_max_position_embeddings"));
  KILN_ASSIGN_OR_RETURN(s.beta_fast, attrs.Float("rope.beta_fast"));
  KILN_ASSIGN_OR_RETURN(s.beta_slow, attrs.Float("rope.beta_slow"));
  KILN_ASSIGN_OR_RETURN(s.attention_factor, attrs.Float("rope.attention_factor"));
  if (s.type == RopeScalingType::kLongRope) {
    KILN_ASSIGN_OR_RETURN(s.short_factor, attrs.Floats("rope.short_factor"));
    KILN_ASSIGN_OR_RETURN(s.long_factor, attrs.Floats("rope.long_factor"));
  }
  return p;
}

}  // namespace kiln
