#include "onnx/onnx_io_names.h"

namespace kiln {

std::string TensorFileName(const std::string& tensor_name) {
  std::string s = tensor_name;
  for (char& c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s + ".npy";
}

}  // namespace kiln
