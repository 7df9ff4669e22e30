// Tensor types: sizes and printing.
#include "graph/tensor_type.h"

#include <fmt/format.h>

namespace kiln {

int64_t TensorType::ElementCount() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

size_t ElementBytes(DType t) {
  const DTypeInfo& info = GetDTypeInfo(t);
  return info.block_size == 1 ? static_cast<size_t>(info.block_bytes) : 0;
}

size_t TensorType::Bytes() const { return static_cast<size_t>(ElementCount()) * ElementBytes(dtype); }

std::string DimsToString(const std::vector<int64_t>& dims) { return fmt::format("{}", fmt::join(dims, ",")); }

std::string TensorType::ToString() const { return fmt::format("{}[{}]", DTypeName(dtype), DimsToString(dims)); }

const char* TensorLayoutName(TensorLayout layout) {
  switch (layout) {
    case TensorLayout::kRowMajor: return "row-major";
    case TensorLayout::kNHWC: return "nhwc";
    case TensorLayout::kNCHW16c: return "nchw16c";
  }
  return "?";
}

}  // namespace kiln
