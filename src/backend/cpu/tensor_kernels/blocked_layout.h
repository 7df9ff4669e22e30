// What the kernels that take activations blocked as nchw16c share. The
// layout stage marks a node with activation_layout = "nchw16c"; its
// non-constant rank-4 inputs and its rank-4 outputs are then stored as
// N x ceil(C/16) x H x W x 16 floats, the channels past C zero (every
// kernel that writes the layout writes those zeros). Constant inputs and
// values of other ranks stay row-major.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

inline constexpr int64_t kChannelBlock = 16;

inline int64_t ChannelBlocks(int64_t channels) {
  return (channels + kChannelBlock - 1) / kChannelBlock;
}

// The layout the node's attribute activation_layout names (row-major when
// it has none); an error naming the node for an unknown name.
Expected<TensorLayout> NodeActivationLayout(const TensorKernelArgs& args);

// Whether the node's attribute says nchw16c (an unknown name says no; the
// factory reports it).
bool NodeIsNchw16c(const TensorKernelArgs& args);

// Input i is a rank-4 value computed at run time, so blocked in nchw16c.
bool BlockedInput(const TensorKernelArgs& args, size_t i);

// The dims of a rank-4 [N, C, H, W] tensor's blocked buffer: [N, C/16
// rounded up, H, W, 16].
std::vector<int64_t> BlockedDims(const std::vector<int64_t>& nchw);

// Floats in the blocked buffer of a rank-4 tensor.
int64_t BlockedElementCount(const std::vector<int64_t>& nchw);

// Writes zeros to the padded channels (C up to a multiple of 16) of a
// blocked tensor of `batch` images of `pixels` pixels each.
void ZeroChannelPadding(float* y, int64_t batch, int64_t channels, int64_t pixels);

// A row-major [N, C, H, W] tensor in nchw16c, padding zero (for constants
// packed when a kernel is made).
std::vector<float> ToNchw16c(const float* x, const std::vector<int64_t>& nchw);

}  // namespace kiln::cpu
