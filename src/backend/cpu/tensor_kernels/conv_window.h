// A convolution's or pool's window geometry as three spatial axes (D, H, W):
// 1-d and 2-d ops get leading axes of size 1, so one set of loops serves
// all, and the fast 2-d paths read H and W.
#pragma once

#include <array>
#include <cstdint>

#include "graph/tensor_ops/conv_geometry.h"

namespace kiln::cpu {

struct Window3 {
  int64_t batch = 1, in_channels = 1, out_channels = 1, group = 1;
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  std::array<int64_t, 3> pad_begin{0, 0, 0}, pad_end{0, 0, 0}, out{1, 1, 1};

  int64_t InPixels() const { return in[0] * in[1] * in[2]; }
  int64_t OutPixels() const { return out[0] * out[1] * out[2]; }
  int64_t Taps() const { return kernel[0] * kernel[1] * kernel[2]; }
  int64_t GroupIn() const { return in_channels / group; }
  int64_t GroupOut() const { return out_channels / group; }
};

// REQUIRES: g.spatial <= 3.
inline Window3 ToWindow3(const WindowGeometry& g) {
  Window3 w;
  w.batch = g.batch;
  w.in_channels = g.in_channels;
  w.out_channels = g.out_channels;
  w.group = g.group;
  const int shift = 3 - g.spatial;
  for (int i = 0; i < g.spatial; ++i) {
    w.in[shift + i] = g.in[i];
    w.kernel[shift + i] = g.kernel[i];
    w.stride[shift + i] = g.stride[i];
    w.dilation[shift + i] = g.dilation[i];
    w.pad_begin[shift + i] = g.pad_begin[i];
    w.pad_end[shift + i] = g.pad_end[i];
    w.out[shift + i] = g.out[i];
  }
  return w;
}

}  // namespace kiln::cpu
