// Moves a model's initializer bytes out of its protobuf into one block, each
// tensor at a 64-byte boundary, and leaves the graph naming them as external
// data. A compiled artifact stores the two apart: the graph is small and
// checked at every load, and the weights are mapped and used where they lie
// (their checksum checked on request, as an LLM artifact's are).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/status.h"

namespace kiln {

struct SplitOnnxModel {
  std::string graph;    // the ModelProto, moved initializers naming `location`
  std::string weights;  // their bytes, each at a multiple of kOnnxWeightAlignment
  int64_t moved = 0;    // initializers moved into `weights`
};

inline constexpr size_t kOnnxWeightAlignment = 64;
// Initializers smaller than this stay in the graph: padding would cost more
// than mapping them saves.
inline constexpr size_t kOnnxMinMovedBytes = 1024;

// The bytes of the model's external data file at `location` (its own
// external initializers move too).
using OnnxExternalFiles = std::function<Expected<std::span<const uint8_t>>(const std::string& location)>;

// Splits the ModelProto in `model`: the main graph's initializers with raw
// or external data of kOnnxMinMovedBytes or more move to `weights` and name
// `location`, smaller ones of external files come into the graph as raw
// data; everything else is copied field for field. `model` must be a
// model the reader accepted (errors name what is inconsistent otherwise).
Expected<SplitOnnxModel> SplitOnnxWeights(std::span<const uint8_t> model, const std::string& location,
                                          const OnnxExternalFiles& external_files);

}  // namespace kiln
