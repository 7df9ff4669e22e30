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

bool ParseTensorLayout(std::string_view name, TensorLayout* layout) {
  for (TensorLayout l : {TensorLayout::kRowMajor, TensorLayout::kNHWC, TensorLayout::kNCHW16c}) {
    if (name == TensorLayoutName(l)) {
      *layout = l;
      return true;
    }
  }
  return false;
}

size_t TensorBytesIn(const TensorType& type, TensorLayout layout) {
  if (layout != TensorLayout::kNCHW16c || type.rank() != 4) return type.Bytes();
  const int64_t channels = type.dims[1], padded = (channels + 15) / 16 * 16;
  if (channels == 0) return 0;
  return type.Bytes() / static_cast<size_t>(channels) * static_cast<size_t>(padded);
}

}  // namespace kiln

namespace kiln {

int64_t TensorLayoutOffset(const std::vector<int64_t>& dims, TensorLayout layout, int64_t n, int64_t c, int64_t h,
                           int64_t w) {
  const int64_t C = dims[1], H = dims[2], W = dims[3];
  switch (layout) {
    case TensorLayout::kRowMajor: return ((n * C + c) * H + h) * W + w;
    case TensorLayout::kNHWC: return ((n * H + h) * W + w) * C + c;
    case TensorLayout::kNCHW16c: return (((n * ((C + 15) / 16) + c / 16) * H + h) * W + w) * 16 + c % 16;
  }
  return 0;
}

}  // namespace kiln
