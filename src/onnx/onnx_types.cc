// ONNX's element types (TensorProto.DataType) against kiln's DType.
#include <fmt/format.h>

#include "onnx/onnx_proto.h"
#include "onnx/onnx_read_context.h"

namespace kiln {

std::optional<DType> DTypeFromOnnx(int32_t onnx_type) {
  using namespace onnx_proto;
  switch (onnx_type) {
    case kFloat: return DType::kF32;
    case kFloat16: return DType::kF16;
    case kBfloat16: return DType::kBF16;
    case kDouble: return DType::kF64;
    case kInt64: return DType::kI64;
    case kInt32: return DType::kI32;
    case kInt16: return DType::kI16;
    case kInt8: return DType::kI8;
    case kUint8: return DType::kU8;
    case kBool: return DType::kBool;
    default: return std::nullopt;
  }
}

std::optional<int32_t> OnnxTypeFromDType(DType dtype) {
  for (int32_t t = onnx_proto::kFloat; t <= onnx_proto::kBfloat16; ++t) {
    if (DTypeFromOnnx(t) == dtype) return t;
  }
  return std::nullopt;
}

std::string OnnxTypeName(int32_t onnx_type) {
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                       "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                       "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (onnx_type >= 0 && onnx_type < static_cast<int32_t>(std::size(kNames))) return kNames[onnx_type];
  return fmt::format("unknown type {}", onnx_type);
}

}  // namespace kiln
