// Moves a model's initializer bytes out of its protobuf into one block, each
// tensor at a 64-byte boundary, and leaves the graph naming them as external
// data. A compiled artifact stores the two apart: the graph is small and
// checked at every load, and the weights are mapped and used where they lie
// (their checksum checked on request, as an LLM artifact's are).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
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

// A graph input's value, which the split graph holds as an initializer of
// the input's name instead of taking it as an input (`--fixed-input`).
struct OnnxInputValue {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  std::span<const uint8_t> bytes;
};

// Splits the ModelProto in `model`: the main graph's initializers with raw
// or external data of kOnnxMinMovedBytes or more move to `weights` and name
// `location`, smaller ones of external files come into the graph as raw
// data; everything else is copied field for field. Each input named in
// `fixed` leaves the graph's inputs and becomes an initializer holding its
// value (moved as the others are; an initializer of that name, the input's
// default, is dropped). `model` must be a model the reader accepted (errors
// name what is inconsistent otherwise).
Expected<SplitOnnxModel> SplitOnnxWeights(std::span<const uint8_t> model, const std::string& location,
                                          const OnnxExternalFiles& external_files,
                                          const std::map<std::string, OnnxInputValue>& fixed = {});

}  // namespace kiln
