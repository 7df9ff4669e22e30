// Multimodal checkpoints whose language model kiln runs on its own (Gemma 3's
// Gemma3ForConditionalGeneration, the form gemma-3-4b and larger ship in):
// the text tower's config, and its tensors' names under the wrapper.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln {

// The wrapper's class name when config.json describes one, else null.
const char* TextTowerWrapperOf(const nlohmann::json& config);

// The text tower's config.json as its own class would read it: the
// wrapper's text_config over that class's defaults (the published configs
// state only what differs from them), with the token ids and dtype the
// wrapper states at its top level. An error when text_config is missing or
// not an object.
Expected<nlohmann::json> TextTowerConfig(const nlohmann::json& config, const std::string& source);

// A wrapper's tensor name as the text model's own ("language_model.model.x"
// and "model.language_model.x" -> "model.x"; "language_model.lm_head.x" ->
// "lm_head.x"), or null for a tensor of another tower (vision, projector).
std::optional<std::string> TextTowerTensorName(std::string_view name);

}  // namespace kiln
