// RoPE's parameters as attributes of a rope node: the graph builder records
// them, a backend builds its cos/sin table from them, so no backend needs
// the model's configuration.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "format/model_config.h"
#include "graph/attribute_map.h"

namespace kiln {

struct RopeParameters {
  int64_t rotary_dim = 0;  // the leading elements of each head that rotate
  double theta = 10000.0;  // the frequency base
  RopeScaling scaling;
};

// Writes p as the "rope.*" attributes.
void SetRopeAttributes(const RopeParameters& p, AttributeMap* attrs);

// Reads the "rope.*" attributes back; errors name the attribute that is
// missing, of the wrong kind, or (the scaling type) unknown.
Expected<RopeParameters> RopeAttributes(const AttributeMap& attrs);

}  // namespace kiln
