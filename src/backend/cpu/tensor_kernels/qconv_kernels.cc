// The quantized convolutions, ConvInteger (int32 out) and QLinearConv
// (requantized out). With constant weights whose values minus their zero
// points fit in [-127, 127], each group runs as im2col rows (padding holds
// the input's zero point, so it adds nothing) times the weights packed once
// for kiln's int8 GEMM kernels (int8_packed_b.h); otherwise, and as the
// reference, plain int32 loops. 1-, 2- and 3-d images (lower ranks run as
// 3-d with unit axes).
#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/tensor_kernels/int8_packed_b.h"
#include "backend/cpu/tensor_kernels/qmatmul_kernels.h"
#include "backend/cpu/tensor_kernels/quant_values.h"
#include "backend/cpu/tensor_kernels/scratch_alignment.h"
#include "graph/tensor_ops/quant_conv_shape.h"

namespace kiln::cpu {
namespace {

struct QConvPlan {
  QConvGeometry g;      // spatial vectors padded to 3 axes
  bool linear = false;  // QLinearConv (else ConvInteger)
  DType x_type = DType::kU8, w_type = DType::kU8, out_type = DType::kI32, y_zp_type = DType::kU8;
  bool w_zp_per_channel = false, w_scale_per_channel = false;
  std::vector<bool> present;  // per input slot: given by the node
  // The int8 GEMM path: the weights of each group packed, and scratch (bytes).
  std::vector<Int8PackedB> packed;
  int64_t positions = 0, patch = 0;  // output positions per image, K of a group
  size_t xq_bytes = 0, x_scale_bytes = 0, row_bytes = 0, y_bytes = 0;

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
                    const int32_t xv =
                        ReadInt(p.x_type, x, x_base + (i0 * g.in[1] + i1) * g.in[2] + i2) - x_zp;
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

Status RunQConvInt8(const QConvPlan& p, const TensorCall& call) {
  const QConvGeometry& g = p.g;
  KernelContext ctx{call.pool, BestIsa()};
  const bool x_unsigned = p.x_type == DType::kU8;
  const int32_t c = x_unsigned ? 128 : 0;
  const int32_t x_zp = ReadInt(p.x_type, p.In(call, 2), 0);
  const Int8Kernel kernel = p.packed[0].kernel;
  const uint8_t zp_byte = Int8KernelByte(static_cast<uint8_t>(x_zp), x_unsigned, kernel);
  const uint8_t pad_byte = Int8KernelByte(static_cast<uint8_t>(c), x_unsigned, kernel);
  const int64_t cin_g = g.in_channels / g.group, cout_g = g.out_channels / g.group;
  const int64_t in_size = g.in[0] * g.in[1] * g.in[2];
  const int64_t P = p.positions, kp = p.packed[0].kp;
  const int64_t padded_n = p.packed[0].padded_n();
  const uint8_t* x = static_cast<const uint8_t*>(call.inputs[0]);
  uint8_t* xq = call.scratch;
  float* x_scale = reinterpret_cast<float*>(call.scratch + p.xq_bytes);
  float* w_scale = reinterpret_cast<float*>(call.scratch + p.xq_bytes + p.x_scale_bytes);
  float* kbias = w_scale + padded_n;
  float* y = reinterpret_cast<float*>(call.scratch + p.xq_bytes + p.x_scale_bytes + p.row_bytes);
  int32_t* sums =
      p.linear
          ? nullptr
          : reinterpret_cast<int32_t*>(call.scratch + p.xq_bytes + p.x_scale_bytes + p.row_bytes + p.y_bytes);
  float xs = 1, y_scale = 1;
  int32_t y_zp = 0;
  if (p.linear) {
    xs = static_cast<const float*>(call.inputs[1])[0];
    y_scale = static_cast<const float*>(call.inputs[6])[0];
    y_zp = ReadInt(p.y_zp_type, p.In(call, 7), 0);
  }
  std::fill(x_scale, x_scale + P, xs);
  const int32_t* bias = static_cast<const int32_t*>(p.In(call, 8));
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const Int8PackedB& pb = p.packed[static_cast<size_t>(grp)];
      // im2col: row o holds the patch of output position o, (ic, k0, k1, k2) in the weights' order.
      ParallelRanges(
          ctx, P, std::max<int64_t>(1, 8192 / std::max<int64_t>(kp, 1)), [&](int64_t r0, int64_t r1, int) {
            for (int64_t o = r0; o < r1; ++o) {
              const int64_t o2 = o % g.out[2], o1 = (o / g.out[2]) % g.out[1], o0 = o / (g.out[2] * g.out[1]);
              uint8_t* row = xq + o * kp;
              int64_t col = 0;
              for (int64_t ic = 0; ic < cin_g; ++ic) {
                const uint8_t* plane = x + (b * g.in_channels + grp * cin_g + ic) * in_size;
                for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0) {
                  const int64_t i0 = o0 * g.strides[0] - g.pad_begin[0] + k0 * g.dilations[0];
                  for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1) {
                    const int64_t i1 = o1 * g.strides[1] - g.pad_begin[1] + k1 * g.dilations[1];
                    for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
                      const int64_t i2 = o2 * g.strides[2] - g.pad_begin[2] + k2 * g.dilations[2];
                      const bool inside =
                          i0 >= 0 && i0 < g.in[0] && i1 >= 0 && i1 < g.in[1] && i2 >= 0 && i2 < g.in[2];
                      row[col++] = inside ? Int8KernelByte(plane[(i0 * g.in[1] + i1) * g.in[2] + i2],
                                                           x_unsigned, kernel)
                                          : zp_byte;
                    }
                  }
                }
              }
              for (; col < kp; ++col) row[col] = pad_byte;
            }
          });
      for (int64_t j = 0; j < padded_n; ++j) {
        const int64_t oc = grp * cout_g + j;
        if (!p.linear || j >= cout_g) {
          w_scale[j] = 1.0f;
          kbias[j] = 0.0f;
          continue;
        }
        w_scale[j] = static_cast<const float*>(call.inputs[4])[p.w_scale_per_channel ? oc : 0];
        const int64_t offset = static_cast<int64_t>(c - x_zp) * pb.w_sum[static_cast<size_t>(j)] +
                               (bias != nullptr ? bias[oc] : 0);
        kbias[j] = xs * w_scale[j] * static_cast<float>(offset);
      }
      Int8Cell cell;
      cell.b = &pb;
      cell.xq = xq;
      cell.ldxq = kp;
      cell.x_scale = x_scale;
      cell.w_scale = w_scale;
      cell.bias = kbias;
      cell.y = y;
      cell.ldy = cout_g;
      cell.sums = sums;
      ParallelGrid(ctx, P, 8, pb.panels, 4, [&](int64_t r0, int64_t r1, int64_t p0, int64_t p1, int) {
        RunInt8Cell(cell, r0, r1, p0, p1);
        const int64_t j1 = std::min(cout_g, p1 * 16);
        for (int64_t j = p0 * 16; j < j1; ++j) {
          const int64_t oc = grp * cout_g + j;
          const int64_t out_base = (b * g.out_channels + oc) * P;
          if (p.linear) {
            for (int64_t r = r0; r < r1; ++r) {
              StoreInt8(p.out_type, call.outputs[0], out_base + r,
                        SaturateRound(y[r * cout_g + j] / y_scale, y_zp, p.out_type));
            }
          } else {
            const int32_t fix = (c - x_zp) * pb.w_sum[static_cast<size_t>(j)];
            int32_t* out = static_cast<int32_t*>(call.outputs[0]) + out_base;
            for (int64_t r = r0; r < r1; ++r) out[r] = sums[r * cout_g + j] + fix;
          }
        }
      });
    }
  }
  return Status::Ok();
}

// Packs each group's constant weights for the int8 GEMM; false leaves the plan on the loops.
bool PlanInt8(const TensorKernelArgs& args, QConvPlan* p) {
  const size_t w_slot = p->linear ? 3 : 1, w_zp_slot = p->linear ? 5 : 3;
  const TensorData* w = args.constants.size() > w_slot ? args.constants[w_slot] : nullptr;
  if (w == nullptr) return false;
  const TensorData* wz = args.has(w_zp_slot) ? args.constants[w_zp_slot] : nullptr;
  if (args.has(w_zp_slot) && wz == nullptr) return false;
  const QConvGeometry& g = p->g;
  const int64_t cout_g = g.out_channels / g.group;
  p->patch = (g.in_channels / g.group) * g.kernel[0] * g.kernel[1] * g.kernel[2];
  p->positions = g.out[0] * g.out[1] * g.out[2];
  if (p->positions == 0 || cout_g == 0 || g.batch == 0) return false;
  for (int64_t grp = 0; grp < g.group; ++grp) {
    auto value = [&](int64_t j, int64_t kk) {
      const int64_t oc = grp * cout_g + j;
      const int32_t zp = wz != nullptr ? ReadInt(p->w_type, wz->data(), p->w_zp_per_channel ? oc : 0) : 0;
      return ReadInt(p->w_type, w->data(), oc * p->patch + kk) - zp;
    };
    Int8PackedB packed;
    if (!PackInt8BFor(args.laid_out, args.node, fmt::format("kiln-int8.g{}", grp), cout_g, p->patch, !p->linear,
                      value, &packed)) {
      return false;
    }
    p->packed.push_back(std::move(packed));
  }
  const int64_t kp = p->packed[0].kp, padded_n = p->packed[0].padded_n();
  p->xq_bytes = AlignUp(static_cast<size_t>(p->positions * kp));
  p->x_scale_bytes = AlignUp(static_cast<size_t>(p->positions) * sizeof(float));
  p->row_bytes = AlignUp(static_cast<size_t>(2 * padded_n) * sizeof(float));
  p->y_bytes = AlignUp(static_cast<size_t>(p->positions * cout_g) * sizeof(float));
  return true;
}

Expected<TensorKernel> MakeQConv(const TensorKernelArgs& args) {
  auto plan = std::make_shared<QConvPlan>();
  QConvPlan& p = *plan;
  p.linear = args.op_type == "QLinearConv";
  const size_t w_slot = p.linear ? 3 : 1, w_zp_slot = p.linear ? 5 : 3;
  KILN_ASSIGN_OR_RETURN(
      p.g, QConvGeometryOf(args.op_type, args.node, args.a(), args.inputs[0].dims, args.inputs[w_slot].dims));
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
  if (args.has(2) && args.inputs[2].dtype != p.x_type)
    return InvalidArgument("x_zero_point's dtype differs from x's");
  if (args.has(w_zp_slot) && args.inputs[w_zp_slot].dtype != p.w_type) {
    return InvalidArgument("w_zero_point's dtype differs from w's");
  }
  p.w_zp_per_channel = args.has(w_zp_slot) && args.inputs[w_zp_slot].ElementCount() > 1;
  if (p.linear) {
    for (size_t slot : {size_t{1}, size_t{4}, size_t{6}}) {
      if (args.inputs[slot].dtype != DType::kF32)
        return Unsupported("scale dtype {} (f32 only)", DTypeName(args.inputs[slot].dtype));
    }
    p.w_scale_per_channel = args.inputs[4].ElementCount() > 1;
    if (args.has(7)) p.y_zp_type = args.inputs[7].dtype;
  }
  p.out_type = args.outputs[0].dtype;
  for (size_t i = 0; i < args.inputs.size(); ++i) p.present.push_back(args.has(i));
  TensorKernel k;
  if (PlanInt8(args, &p)) {
    k.impl = std::string("kiln-int8-") + Int8KernelName(p.packed[0].kernel) + " im2col packed-weights";
    k.scratch_bytes = p.xq_bytes + p.x_scale_bytes + p.row_bytes + p.y_bytes + (p.linear ? 0 : p.y_bytes);
    k.run = [plan](const TensorCall& call) { return RunQConvInt8(*plan, call); };
    return k;
  }
  k.impl = "reference";
  k.run = [plan](const TensorCall& call) { return RunQConv(*plan, call); };
  return k;
}

}  // namespace

void AddQuantConvKernels(std::vector<TensorKernelEntry>* kernels) {
  const char* limits =
      "1-d to 3-d; int8 GEMM kernels for constant weights (values minus zero point in [-127, 127])";
  kernels->push_back({"ConvInteger", MakeQConv, {DType::kU8, DType::kI8}, limits});
  kernels->push_back({"QLinearConv", MakeQConv, {DType::kU8, DType::kI8}, limits});
}

}  // namespace kiln::cpu
