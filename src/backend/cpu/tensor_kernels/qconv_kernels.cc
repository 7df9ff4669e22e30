// The quantized convolutions, ConvInteger (int32 out) and QLinearConv
// (requantized out), as plain int32 loops over 1-, 2- and 3-d images
// (lower ranks run as 3-d with unit axes).
#include <algorithm>
#include <memory>
#include <vector>

#include "backend/cpu/tensor_kernels/qmatmul_kernels.h"
#include "backend/cpu/tensor_kernels/quant_values.h"
#include "graph/tensor_ops/quant_conv_shape.h"

namespace kiln::cpu {
namespace {

struct QConvPlan {
  QConvGeometry g;  // spatial vectors padded to 3 axes
  bool linear = false;  // QLinearConv (else ConvInteger)
  DType x_type = DType::kU8, w_type = DType::kU8, out_type = DType::kI32, y_zp_type = DType::kU8;
  bool w_zp_per_channel = false, w_scale_per_channel = false;
  std::vector<bool> present;  // per input slot: given by the node

  // Input `slot`, or null when the node omits it.
  const void* In(const TensorCall& call, size_t slot) const {
    return slot < present.size() && present[slot] ? call.inputs[slot] : nullptr;
  }
};

// Slots: ConvInteger x 0, w 1, x_zp 2, w_zp 3; QLinearConv x 0, x_scale 1,
// x_zp 2, w 3, w_scale 4, w_zp 5, y_scale 6, y_zp 7, B 8.
Status RunQConv(const QConvPlan& p, const TensorCall& call) {
  const QConvGeometry& g = p.g;
  const size_t w_slot = p.linear ? 3 : 1, x_zp_slot = 2, w_zp_slot = p.linear ? 5 : 3;
  const void* x = call.inputs[0];
  const void* w = call.inputs[w_slot];
  const int32_t x_zp = ReadInt(p.x_type, p.In(call, x_zp_slot), 0);
  const int64_t cin_g = g.in_channels / g.group, cout_g = g.out_channels / g.group;
  const int64_t in_size = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_size = g.out[0] * g.out[1] * g.out[2];
  const int64_t k_size = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t oc = 0; oc < g.out_channels; ++oc) {
      const int64_t grp = oc / cout_g;
      const int32_t w_zp = ReadInt(p.w_type, p.In(call, w_zp_slot), p.w_zp_per_channel ? oc : 0);
      float scale = 0, y_scale = 1;
      int32_t y_zp = 0, bias = 0;
      if (p.linear) {
        scale = static_cast<const float*>(call.inputs[1])[0] *
                static_cast<const float*>(call.inputs[4])[p.w_scale_per_channel ? oc : 0];
        y_scale = static_cast<const float*>(call.inputs[6])[0];
        y_zp = ReadInt(p.y_zp_type, p.In(call, 7), 0);
        bias = p.In(call, 8) != nullptr ? static_cast<const int32_t*>(p.In(call, 8))[oc] : 0;
      }
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
            int32_t acc = bias;
            for (int64_t ic = 0; ic < cin_g; ++ic) {
              const int64_t x_base = (b * g.in_channels + grp * cin_g + ic) * in_size;
              const int64_t w_base = (oc * cin_g + ic) * k_size;
              for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
                const int64_t i0 = o0 * g.strides[0] - g.pad_begin[0] + k0 * g.dilations[0];
                if (i0 < 0 || i0 >= g.in[0]) continue;
                for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
                  const int64_t i1 = o1 * g.strides[1] - g.pad_begin[1] + k1 * g.dilations[1];
                  if (i1 < 0 || i1 >= g.in[1]) continue;
                  for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
                    const int64_t i2 = o2 * g.strides[2] - g.pad_begin[2] + k2 * g.dilations[2];
                    if (i2 < 0 || i2 >= g.in[2]) continue;
                    const int32_t xv = ReadInt(p.x_type, x, x_base + (i0 * g.in[1] + i1) * g.in[2] + i2) - x_zp;
                    const int32_t wv =
                        ReadInt(p.w_type, w, w_base + (k0 * g.kernel[1] + k1) * g.kernel[2] + k2) - w_zp;
                    acc += xv * wv;
                  }
                }
              }
            }
            const int64_t o = (b * g.out_channels + oc) * out_size + (o0 * g.out[1] + o1) * g.out[2] + o2;
            if (p.linear) {
              StoreInt8(p.out_type, call.outputs[0], o,
                        SaturateRound(static_cast<float>(acc) * scale / y_scale, y_zp, p.out_type));
            } else {
              static_cast<int32_t*>(call.outputs[0])[o] = acc;
            }
          }
        }
      }
    }
  }
  return Status::Ok();
}

Expected<TensorKernel> MakeQConv(const TensorKernelArgs& args) {
  auto plan = std::make_shared<QConvPlan>();
  QConvPlan& p = *plan;
  p.linear = args.op_type == "QLinearConv";
  const size_t w_slot = p.linear ? 3 : 1, w_zp_slot = p.linear ? 5 : 3;
  KILN_ASSIGN_OR_RETURN(p.g, QConvGeometryOf(args.op_type, args.node, args.a(), args.inputs[0].dims,
                                             args.inputs[w_slot].dims));
  if (p.g.in.size() > 3) return Unsupported("{}-d convolutions (1-d to 3-d)", p.g.in.size());
  while (p.g.in.size() < 3) {
    p.g.in.push_back(1);
    p.g.kernel.push_back(1);
    p.g.out.push_back(1);
    p.g.strides.push_back(1);
    p.g.dilations.push_back(1);
    p.g.pad_begin.push_back(0);
  }
  p.x_type = args.inputs[0].dtype;
  p.w_type = args.inputs[w_slot].dtype;
  if (args.has(2) && args.inputs[2].dtype != p.x_type) return InvalidArgument("x_zero_point's dtype differs from x's");
  if (args.has(w_zp_slot) && args.inputs[w_zp_slot].dtype != p.w_type) {
    return InvalidArgument("w_zero_point's dtype differs from w's");
  }
  p.w_zp_per_channel = args.has(w_zp_slot) && args.inputs[w_zp_slot].ElementCount() > 1;
  if (p.linear) {
    for (size_t slot : {size_t{1}, size_t{4}, size_t{6}}) {
      if (args.inputs[slot].dtype != DType::kF32) return Unsupported("scale dtype {} (f32 only)", DTypeName(args.inputs[slot].dtype));
    }
    p.w_scale_per_channel = args.inputs[4].ElementCount() > 1;
    if (args.has(7)) p.y_zp_type = args.inputs[7].dtype;
  }
  p.out_type = args.outputs[0].dtype;
  for (size_t i = 0; i < args.inputs.size(); ++i) p.present.push_back(args.has(i));
  TensorKernel k;
  k.impl = "reference";
  k.run = [plan](const TensorCall& call) { return RunQConv(*plan, call); };
  return k;
}

}  // namespace

void AddQuantConvKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"ConvInteger", MakeQConv, {DType::kU8, DType::kI8}, "1-d to 3-d; plain loops"});
  kernels->push_back({"QLinearConv", MakeQConv, {DType::kU8, DType::kI8}, "1-d to 3-d; plain loops"});
}

}  // namespace kiln::cpu
