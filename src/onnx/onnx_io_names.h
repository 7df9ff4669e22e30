// File names for a graph's tensors: `kiln run` writes output NAME as
// DIR/<name>.npy with every character outside [A-Za-z0-9._-] replaced by
// '_' (ONNX names may hold '/', ':' and the like).
#pragma once

#include <string>

namespace kiln {

std::string TensorFileName(const std::string& tensor_name);

}  // namespace kiln
