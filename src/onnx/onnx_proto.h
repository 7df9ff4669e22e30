// The parts of onnx.proto's messages the reader uses, as plain structs, and
// their decoding from the protobuf wire format. kiln decodes the wire format
// itself rather than linking libprotobuf: the sentencepiece library the
// tokenizer links exports a protobuf runtime of its own, and two protobuf
// runtimes in one process clash. Field numbers are onnx.proto's (IR version 8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln::onnx_proto {

// TensorProto.DataType.
enum DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBfloat16 = 16,
};

// AttributeProto.AttributeType.
enum AttributeType : int32_t {
  kAttrUndefined = 0,
  kAttrFloat = 1,
  kAttrInt = 2,
  kAttrString = 3,
  kAttrTensor = 4,
  kAttrGraph = 5,
  kAttrFloats = 6,
  kAttrInts = 7,
  kAttrStrings = 8,
  kAttrTensors = 9,
  kAttrGraphs = 10,
  kAttrSparseTensor = 11,
  kAttrSparseTensors = 12,
  kAttrTypeProto = 13,
  kAttrTypeProtos = 14,
};

struct StringStringEntry {
  std::string key;
  std::string value;
};

struct Tensor {
  std::vector<int64_t> dims;
  int32_t data_type = 0;
  bool has_segment = false;
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;
  size_t string_data_count = 0;
  std::vector<int64_t> int64_data;
  std::string name;
  bool has_raw_data = false;
  std::string_view raw_data;  // into the bytes being decoded
  std::vector<StringStringEntry> external_data;
  int32_t data_location = 0;  // 1: EXTERNAL
  std::vector<double> double_data;
  std::vector<uint64_t> uint64_data;
};

struct Dimension {
  bool has_dim_value = false;
  int64_t dim_value = 0;
  bool has_dim_param = false;
  std::string dim_param;
};

// TypeProto, reduced to what kiln reads: which kind of type it is, and for a
// tensor its element type and shape.
struct Type {
  enum Kind { kNotSet, kTensor, kSequence, kMap, kOptional, kSparseTensor };
  Kind kind = kNotSet;
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<Dimension> shape;
};

struct ValueInfo {
  std::string name;
  bool has_type = false;
  Type type;
};

struct Graph;

struct Attribute {
  std::string name;
  std::string ref_attr_name;
  int32_t type = 0;
  bool has_f = false, has_i = false, has_s = false;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::unique_ptr<Tensor> t;
  std::unique_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  size_t other_values = 0;  // tensors, graphs, sparse tensors, type protos: kiln reads none
};

struct Node {
  std::vector<std::string> input;
  std::vector<std::string> output;
  std::string name;
  std::string op_type;
  std::string domain;
  std::vector<Attribute> attribute;
};

struct Graph {
  std::vector<Node> node;
  std::string name;
  std::vector<Tensor> initializer;
  size_t sparse_initializer_count = 0;
  std::vector<ValueInfo> input;
  std::vector<ValueInfo> output;
};

struct OperatorSetId {
  std::string domain;
  int64_t version = 0;
};

struct Model {
  int64_t ir_version = 0;
  std::vector<OperatorSetId> opset_import;
  std::string producer_name;
  std::string producer_version;
  bool has_graph = false;
  Graph graph;
  std::vector<std::string> function_names;  // "domain.name" of each local function
};

// Decodes a ModelProto from `size` bytes at `data`; strings in the result
// that are views (raw_data) point into those bytes. Messages nest at most
// `max_depth` deep, and at most `max_items` messages and strings are decoded
// (kResourceExhausted beyond). Fails (kCorrupt) on bytes that are not a
// well-formed ModelProto: truncated, mistyped fields, lengths beyond the end.
Status DecodeModel(const uint8_t* data, size_t size, int max_depth, int64_t max_items, Model* model);

// Decodes a lone TensorProto (a .pb file of the ONNX test data).
Status DecodeTensorProto(const uint8_t* data, size_t size, int64_t max_items, Tensor* tensor);

}  // namespace kiln::onnx_proto
