// The shapes of real published models, for benchmarks and tests that need
// real sizes without downloading weights (see WeightStore::Dummy).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/model_config.h"

namespace kiln {

// "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen3-0.6b", "llama-3.2-1b", "llama-3-8b",
// "phi-4-mini", ...: the values of the config.json published with
// Qwen2.5-0.5B, Qwen2.5-1.5B, Qwen3-0.6B, Llama-3.2-1B, Llama-3-8B,
// Phi-4-mini-instruct and the rest of PresetNames(). NotFound (listing the
// names) for others.
Expected<ModelConfig> PresetConfig(std::string_view name);

// The names PresetConfig accepts.
std::vector<std::string> PresetNames();

}  // namespace kiln
