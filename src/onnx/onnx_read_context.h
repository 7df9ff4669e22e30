// What the pieces of the ONNX reader share while reading one file (internal
// to the onnx area).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/dtype.h"
#include "onnx/onnx_reader.h"

namespace kiln {

struct OnnxReadContext {
  const OnnxReadOptions* options = nullptr;
  const std::map<std::string, int64_t>* opset_imports = nullptr;  // domain -> version, "" the default
  std::string base_dir;         // where external data files are; "" refuses them
  uint64_t external_bytes = 0;  // read so far from external data files
  int64_t nodes = 0;            // read so far, all graphs together
  std::set<std::string> external_files;  // locations read from
};

// kiln's type for ONNX's TensorProto.DataType value `onnx_type`, or nullopt
// for the types kiln does not hold (string, complex, unsigned 16/32/64-bit).
std::optional<DType> DTypeFromOnnx(int32_t onnx_type);

// ONNX's TensorProto.DataType value for kiln's `dtype` (DTypeFromOnnx's
// inverse), or nullopt for a type ONNX has no value for.
std::optional<int32_t> OnnxTypeFromDType(DType dtype);

// The ONNX name of `onnx_type` ("FLOAT", "STRING", ...), for messages.
std::string OnnxTypeName(int32_t onnx_type);

}  // namespace kiln
