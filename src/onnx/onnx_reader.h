// Reads .onnx files (protobuf ModelProto) into kiln's OnnxModel, checking
// everything kiln relies on later: opsets, shapes of the inputs, initializer
// sizes, that every node input has a producer and the nodes form no cycle.
// A file that breaks a rule gets a Status naming the node or tensor at fault;
// the limits keep an untrusted file from exhausting memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "onnx/onnx_model.h"

namespace kiln {

struct OnnxLimits {
  uint64_t max_file_bytes = (uint64_t{1} << 31) - 1;  // protobuf's own ceiling for a message
  int64_t max_tensor_elements = int64_t{1} << 32;     // per tensor
  uint64_t max_external_bytes = uint64_t{1} << 36;    // read from external data files, all tensors together
  int64_t max_nodes = int64_t{1} << 20;               // all graphs together, subgraphs included
  int max_graph_nesting = 8;                          // subgraphs within subgraphs
  // Messages (nodes, attributes, tensors, ...) and strings (names) in the
  // file, each of which takes far more memory than its bytes on the wire.
  int64_t max_proto_items = int64_t{1} << 22;
};

struct OnnxReadOptions {
  // Shapes for graph inputs, replacing what the file declares (symbolic or
  // missing dimensions): `--input-shape name:1,3,640,640`.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  OnnxLimits limits;
  // When set, external data files are these bytes by location (a compiled
  // artifact's copies) instead of files beside the model.
  std::function<Expected<std::span<const uint8_t>>(const std::string& location)> external_data;
  // What keeps the bytes external_data returns valid (the mapped artifact).
  // When set, a tensor whose bytes lie there at a 64-byte boundary refers to
  // them where they lie, holding the keeper, instead of copying them.
  std::shared_ptr<const void> external_data_keeper;
};

// The default-domain opsets kiln reads.
inline constexpr int64_t kOnnxMinOpset = 7;
inline constexpr int64_t kOnnxMaxOpset = 17;

// Reads the model at `path`; external data files are found relative to its folder.
Expected<OnnxModel> ReadOnnxModel(const std::string& path, const OnnxReadOptions& options = {});

// Reads a model from memory. External data resolves against `base_dir`;
// with an empty `base_dir` a tensor with external data is an error.
Expected<OnnxModel> ParseOnnxModel(const void* data, size_t size, const std::string& base_dir,
                                   const OnnxReadOptions& options = {});

// Reads a file holding one TensorProto (ONNX's test data: input_0.pb). The
// tensor must hold its data itself (no external data).
Expected<OnnxTensor> ReadOnnxTensorFile(const std::string& path, const OnnxLimits& limits = {});

}  // namespace kiln
