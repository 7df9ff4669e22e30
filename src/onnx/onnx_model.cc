#include "onnx/onnx_model.h"

namespace kiln {

bool OnnxValueInfo::has_static_shape() const {
  if (!shape) return false;
  for (const OnnxDim& d : *shape) {
    if (!d.is_static()) return false;
  }
  return true;
}

int64_t OnnxTensor::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // the reader bounds the product
  return n;
}

const char* OnnxAttributeKindName(OnnxAttribute::Kind kind) {
  switch (kind) {
    case OnnxAttribute::Kind::kFloat: return "float";
    case OnnxAttribute::Kind::kInt: return "int";
    case OnnxAttribute::Kind::kString: return "string";
    case OnnxAttribute::Kind::kTensor: return "tensor";
    case OnnxAttribute::Kind::kGraph: return "graph";
    case OnnxAttribute::Kind::kFloats: return "floats";
    case OnnxAttribute::Kind::kInts: return "ints";
    case OnnxAttribute::Kind::kStrings: return "strings";
  }
  return "unknown";
}

const OnnxAttribute* OnnxNode::FindAttribute(const std::string& attr_name) const {
  for (const OnnxAttribute& a : attributes) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

const OnnxTensor* OnnxGraph::FindInitializer(const std::string& tensor_name) const {
  for (const OnnxTensor& t : initializers) {
    if (t.name == tensor_name) return &t;
  }
  return nullptr;
}

int64_t OnnxModel::default_opset() const {
  auto it = opset_imports.find("");
  return it == opset_imports.end() ? 0 : it->second;
}

}  // namespace kiln
