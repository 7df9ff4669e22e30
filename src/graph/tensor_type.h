// N-dimensional tensors in kiln's graph IR: an element type and a static
// shape (every dimension bound at compile time), and a caller's buffer of
// such a tensor. The LLM graphs' row-space values do not use these; the
// graphs imported from ONNX do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace kiln {

struct TensorType {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // {} is a scalar

  int64_t ElementCount() const;
  // Bytes of the whole tensor (0 for a block-quantized dtype).
  size_t Bytes() const;
  int rank() const { return static_cast<int>(dims.size()); }
  // "f32[1,3,224,224]".
  std::string ToString() const;

  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  bool operator<(const TensorType& o) const { return dtype != o.dtype ? dtype < o.dtype : dims < o.dims; }
};

// "1,3,224,224" (for messages and plans).
std::string DimsToString(const std::vector<int64_t>& dims);

// Bytes of one element of a plain dtype (f32: 4, bool: 1, ...).
size_t ElementBytes(DType t);

// Memory a caller owns, holding one tensor in row-major order.
struct TensorRef {
  TensorType type;
  void* data = nullptr;
};

// How an activation's axes are laid out in memory, decided by the layout
// stage for 4-d image tensors (everything else is row-major as its dims say).
enum class TensorLayout : uint8_t {
  kRowMajor,  // as the dims say (NCHW for an ONNX image tensor)
  kNHWC,      // channels last: the dims stay N,C,H,W, memory is N,H,W,C
  kNCHW16c,   // blocked: N, ceil(C/16), H, W, 16 (channels padded to 16)
};

const char* TensorLayoutName(TensorLayout layout);
// The layout TensorLayoutName spells `name`; false for none.
bool ParseTensorLayout(std::string_view name, TensorLayout* layout);
// Bytes a tensor of `type` takes in `layout`: nchw16c pads a rank-4
// tensor's channels (axis 1) up to a multiple of 16.
size_t TensorBytesIn(const TensorType& type, TensorLayout layout);
// Where element (n, c, h, w) of a 4-d tensor of `dims` (N,C,H,W) lies in
// `layout`, in elements.
int64_t TensorLayoutOffset(const std::vector<int64_t>& dims, TensorLayout layout, int64_t n, int64_t c, int64_t h,
                           int64_t w);

}  // namespace kiln
