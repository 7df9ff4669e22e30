// A ModelConfig as JSON, every field by its own name: how a compiled
// artifact records the model it was compiled from, whatever file that was.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "format/model_config.h"

namespace kiln {

nlohmann::json ModelConfigToJson(const ModelConfig& config);
// The inverse of ModelConfigToJson; checks types and Validate()s the result.
Expected<ModelConfig> ModelConfigFromJson(const nlohmann::json& j);

}  // namespace kiln
