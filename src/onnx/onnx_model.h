// kiln's own in-memory form of an ONNX model, as the reader (onnx_reader.h)
// makes it: validated, with its nodes in topological order and every
// initializer's bytes in memory. Nothing here depends on protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shared_bytes.h"

namespace kiln {

struct OnnxGraph;

// One dimension of a declared shape: a fixed size, or a symbol
// ("batch", from dim_param) or nothing at all (unknown), both bound later.
struct OnnxDim {
  std::optional<int64_t> value;  // set for a static dimension
  std::string symbol;            // the dim_param name, "" when none

  bool is_static() const { return value.has_value(); }
};

// A graph input or output: its element type and shape, where declared.
struct OnnxValueInfo {
  std::string name;
  std::optional<DType> dtype;                 // absent when the file gives none
  std::optional<std::vector<OnnxDim>> shape;  // absent when the file gives none; {} is a scalar

  bool has_static_shape() const;
};

// A dense N-dimensional tensor (an initializer or a tensor attribute). The
// data is its elements in row-major order, little-endian, as ONNX's
// raw_data lays them out, whichever field or external file they came from
// (shared: a compiled artifact's weights are used where they are mapped).
struct OnnxTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  SharedBytes data;

  int64_t element_count() const;
};

struct OnnxAttribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings };

  std::string name;
  Kind kind = Kind::kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<const OnnxTensor> t;
  std::shared_ptr<const OnnxGraph> g;  // a subgraph (If, Loop, Scan)
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

const char* OnnxAttributeKindName(OnnxAttribute::Kind kind);

struct OnnxNode {
  std::string name;  // may be empty in the file; the reader names such nodes "<op_type>_<index>"
  std::string op_type;
  std::string domain;                // "" for the default domain ("ai.onnx" is read as "")
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::vector<OnnxAttribute> attributes;

  // The attribute called `name`, or nullptr.
  const OnnxAttribute* FindAttribute(const std::string& name) const;
};

struct OnnxGraph {
  std::string name;
  // The inputs a caller feeds: the graph's declared inputs that are not
  // initializers (older files list initializers among the inputs too).
  std::vector<OnnxValueInfo> inputs;
  std::vector<OnnxValueInfo> outputs;
  std::vector<OnnxTensor> initializers;
  std::vector<OnnxNode> nodes;  // topologically ordered: producers before users

  // The initializer called `name`, or nullptr.
  const OnnxTensor* FindInitializer(const std::string& name) const;
};

struct OnnxModel {
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  // Opset version per imported domain; the default domain is "".
  std::map<std::string, int64_t> opset_imports;
  OnnxGraph graph;
  // The external data files the initializers were read from (locations, as
  // the file names them).
  std::set<std::string> external_files;

  // The version of the default domain's opset (0 when the model imports
  // only other domains).
  int64_t default_opset() const;
};

}  // namespace kiln
