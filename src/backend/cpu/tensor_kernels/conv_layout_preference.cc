// The CPU's wish for blocked convolution activations.
#include "backend/cpu/tensor_kernels/conv_layout_preference.h"

#include <cstdlib>
#include <string>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_onednn.h"
#include "backend/cpu/tensor_kernels/conv_window.h"

namespace kiln::cpu {

bool ConvPrefersBlockedActivations(const TensorKernelArgs& args) {
  if (args.op_type != "Conv" && args.op_type != "kiln.FusedConv") return false;
  if (args.inputs.size() < 2 || args.inputs[0].rank() != 4 || args.inputs[0].dtype != DType::kF32)
    return false;
  const char* forced = std::getenv("KILN_CONV");
  if (forced != nullptr && *forced != '\0' && std::string(forced) != "onednn-blocked") return false;
  auto geometry = ConvGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims, args.inputs[1].dims);
  if (!geometry.ok() || geometry->spatial != 2) return false;
  const Window3 g = ToWindow3(*geometry);
  // A depthwise convolution runs on kiln's nchw16c kernel, faster there than
  // row-major, and keeps the 1x1 convolutions around it blocked too
  // (kiln's nchw16c GEMM), so MobileNet / ShuffleNet run blocked end to end.
  // (A stem, kStem, wants nothing of its own: it joins the chain that grows
  // back to it from the layers after it, reading its input row-major.)
  if (KilnBlockedConvShape(g, BestIsa()) == BlockedConvShape::kDepthwise && g.out[1] * g.out[2] > 1 &&
      (forced == nullptr || *forced == '\0'))
    return true;
  return PreferOneDnnBlocked(g, BestIsa());
}

bool ConvReadsRowMajorInput(const TensorKernelArgs& args) {
  if (args.op_type != "Conv" && args.op_type != "kiln.FusedConv") return false;
  if (args.inputs.size() < 2 || args.inputs[0].rank() != 4 || args.inputs[0].dtype != DType::kF32)
    return false;
  const char* forced = std::getenv("KILN_CONV");
  if (forced != nullptr && std::string(forced) == "reference") return false;
  auto geometry = ConvGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims, args.inputs[1].dims);
  if (!geometry.ok() || geometry->spatial != 2) return false;
  return KilnBlockedConvShape(ToWindow3(*geometry), BestIsa()) == BlockedConvShape::kStem;
}

}  // namespace kiln::cpu
