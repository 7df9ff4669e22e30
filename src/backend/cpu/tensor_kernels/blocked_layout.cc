// Helpers of the nchw16c kernels (see blocked_layout.h).
#include "backend/cpu/tensor_kernels/blocked_layout.h"

#include <algorithm>
#include <string>

namespace kiln::cpu {

Expected<TensorLayout> NodeActivationLayout(const TensorKernelArgs& args) {
  if (args.attrs == nullptr || !args.a().Has("activation_layout")) return TensorLayout::kRowMajor;
  auto name = args.a().String("activation_layout");
  const std::string layout_name = name.ok() ? *name : "";
  for (TensorLayout layout : {TensorLayout::kRowMajor, TensorLayout::kNHWC, TensorLayout::kNCHW16c}) {
    if (layout_name == TensorLayoutName(layout)) return layout;
  }
  return InvalidArgument("{} {}: activation_layout '{}' is none of row-major, nhwc, nchw16c", args.op_type,
                         args.node, layout_name);
}

bool NodeIsNchw16c(const TensorKernelArgs& args) {
  auto layout = NodeActivationLayout(args);
  return layout.ok() && *layout == TensorLayout::kNCHW16c;
}

bool BlockedInput(const TensorKernelArgs& args, size_t i) {
  const bool constant = i < args.constants.size() && args.constants[i] != nullptr;
  return args.has(i) && !constant && args.inputs[i].rank() == 4;
}

std::vector<int64_t> BlockedDims(const std::vector<int64_t>& nchw) {
  return {nchw[0], ChannelBlocks(nchw[1]), nchw[2], nchw[3], kChannelBlock};
}

int64_t BlockedElementCount(const std::vector<int64_t>& nchw) {
  return nchw[0] * ChannelBlocks(nchw[1]) * nchw[2] * nchw[3] * kChannelBlock;
}

void ZeroChannelPadding(float* y, int64_t batch, int64_t channels, int64_t pixels) {
  const int64_t used = channels % kChannelBlock;
  if (used == 0) return;
  const int64_t blocks = ChannelBlocks(channels);
  for (int64_t n = 0; n < batch; ++n) {
    float* last = y + ((n * blocks + blocks - 1) * pixels) * kChannelBlock;
    for (int64_t p = 0; p < pixels; ++p)
      std::fill(last + p * kChannelBlock + used, last + (p + 1) * kChannelBlock, 0.0f);
  }
}

std::vector<float> ToNchw16c(const float* x, const std::vector<int64_t>& nchw) {
  const int64_t n = nchw[0], c = nchw[1], pixels = nchw[2] * nchw[3], blocks = ChannelBlocks(c);
  std::vector<float> y(static_cast<size_t>(BlockedElementCount(nchw)), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* src = x + (i * c + ch) * pixels;
      float* dst =
          y.data() + ((i * blocks + ch / kChannelBlock) * pixels) * kChannelBlock + ch % kChannelBlock;
      for (int64_t p = 0; p < pixels; ++p) dst[p * kChannelBlock] = src[p];
    }
  }
  return y;
}

}  // namespace kiln::cpu
