// The CPU's wish for blocked convolution activations.
#include "backend/cpu/tensor_kernels/conv_layout_preference.h"

#include <cstdlib>
#include <string>

#include "backend/cpu/kernels/isa.h"
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
  return PreferOneDnnBlocked(ToWindow3(*geometry), BestIsa());
}

}  // namespace kiln::cpu
