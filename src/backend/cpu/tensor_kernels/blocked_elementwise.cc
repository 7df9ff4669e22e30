// Elementwise kernels on nchw16c activations (see blocked_elementwise.h).
// A unary map does not care where a channel sits: it runs over the whole
// padded buffer. A binary op is a numpy broadcast over the blocked dims
// [N, C/16, H, W, 16], where a per-channel operand is [N|1, C/16, 1, 1, 16]
// and a single value [1, 1, 1, 1, 1].
#include "backend/cpu/tensor_kernels/blocked_elementwise.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/broadcast_loop.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace {

// The unary ops taken blocked, and whether f(0) = 0 (the padding stays zero).
struct BlockedUnaryOp {
  std::string_view op;
  bool keeps_zero;
};

constexpr BlockedUnaryOp kBlockedUnaryOps[] = {{"Relu", true},
                                               {"LeakyRelu", true},
                                               {"HardSwish", true},
                                               {"kiln.Silu", true},
                                               {"Tanh", true},
                                               {"Abs", true},
                                               {"Neg", true},
                                               {"Sign", true},
                                               {"Erf", true},
                                               {"Gelu", true},
                                               {"Elu", true},
                                               {"Selu", true},
                                               {"Celu", true},
                                               {"Mish", true},
                                               {"Softsign", true},
                                               {"Identity", true},
                                               {"Sigmoid", false},
                                               {"HardSigmoid", false},
                                               {"Clip", false},
                                               {"Exp", false},
                                               {"Softplus", false},
                                               {"Sqrt", true},
                                               {"Floor", true},
                                               {"Ceil", true},
                                               {"Round", true},
                                               {"Sin", true},
                                               {"Cos", false},
                                               {"Reciprocal", false},
                                               {"ThresholdedRelu", false}};

const BlockedUnaryOp* FindBlockedUnary(std::string_view op) {
  for (const BlockedUnaryOp& u : kBlockedUnaryOps) {
    if (u.op == op) return &u;
  }
  return nullptr;
}

bool IsF32Rank4(const TensorType& t) {
  return t.dtype == DType::kF32 && t.rank() == 4;
}

// [N, C, H, W] as the dims of its padded buffer read row-major, [N, C16, H, W].
std::vector<int64_t> PaddedDims(const std::vector<int64_t>& d) {
  return {d[0], ChannelBlocks(d[1]) * kChannelBlock, d[2], d[3]};
}

}  // namespace

bool UnaryTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || FindBlockedUnary(args.op_type) == nullptr) return false;
  if (args.outputs.size() != 1 || !IsF32Rank4(args.inputs[0]) || !IsF32Rank4(args.outputs[0])) return false;
  if (args.inputs[0].dims != args.outputs[0].dims) return false;
  // Clip's bounds are single values.
  for (size_t i = 1; i < args.inputs.size(); ++i) {
    if (args.has(i) && args.inputs[i].ElementCount() != 1) return false;
  }
  return true;
}

Expected<TensorKernel> MakeBlockedUnary(const TensorKernelArgs& args, TensorKernelFactory row_major) {
  if (!UnaryTakesLayout(TensorLayout::kNCHW16c, args)) {
    return Unsupported("{} {}: nchw16c activations need an f32 rank-4 input and output", args.op_type,
                       args.node);
  }
  TensorKernelArgs padded = args;
  const std::vector<int64_t> dims = args.outputs[0].dims;
  padded.inputs[0].dims = PaddedDims(dims);
  padded.outputs[0].dims = PaddedDims(dims);
  KILN_ASSIGN_OR_RETURN(TensorKernel k, row_major(padded));
  k.impl += "-nchw16c";
  if (dims[1] % kChannelBlock != 0 && !FindBlockedUnary(args.op_type)->keeps_zero) {
    auto run = std::move(k.run);
    k.run = [run, dims](const TensorCall& call) -> Status {
      KILN_RETURN_IF_ERROR(run(call));
      ZeroChannelPadding(static_cast<float*>(call.outputs[0]), dims[0], dims[1], dims[2] * dims[3]);
      return Status::Ok();
    };
  }
  return k;
}

namespace {

// How one operand of a blocked binary op is read.
struct BlockedOperand {
  std::vector<int64_t> dims;                   // 5-d, broadcast to the output's blocked dims
  std::shared_ptr<std::vector<float>> packed;  // a constant, laid out for dims; null: the call's input
};

// The operand's blocked reading, or nothing when it cannot be read blocked.
std::optional<BlockedOperand> OperandFor(const TensorKernelArgs& args, size_t i) {
  const TensorType& t = args.inputs[i];
  const int64_t channels = args.outputs[0].dims[1];
  if (t.dtype != DType::kF32 || t.rank() > 4) return std::nullopt;
  const TensorData* constant = i < args.constants.size() ? args.constants[i] : nullptr;
  if (constant == nullptr) {
    // A single value sits first in its buffer, blocked or not.
    if (t.ElementCount() == 1) return BlockedOperand{{1, 1, 1, 1, 1}, nullptr};
    if (t.rank() != 4 || t.dims[1] != channels) return std::nullopt;
    return BlockedOperand{BlockedDims(t.dims), nullptr};
  }
  std::vector<int64_t> d4(static_cast<size_t>(4 - t.rank()), 1);
  d4.insert(d4.end(), t.dims.begin(), t.dims.end());
  BlockedOperand o;
  if (d4[1] == channels) {
    o.dims = BlockedDims(d4);
    o.packed = std::make_shared<std::vector<float>>(ToNchw16c(constant->As<float>(), d4));
  } else {
    // Broadcast along the channels: one value per pixel, every lane reads it.
    o.dims = {d4[0], 1, d4[2], d4[3], 1};
    const float* v = constant->As<float>();
    o.packed = std::make_shared<std::vector<float>>(v, v + t.ElementCount());
  }
  return o;
}

std::optional<VecBinaryOp> BinaryOpFor(std::string_view op) {
  if (op == "Add") return VecBinaryOp::kAdd;
  if (op == "Sub") return VecBinaryOp::kSub;
  if (op == "Mul") return VecBinaryOp::kMul;
  if (op == "Div") return VecBinaryOp::kDiv;
  return std::nullopt;
}

// y = x op s (or s op x when scale_first) over planes [begin, end) of
// `pixels` 16-channel vectors, with one 16-channel vector of s per plane
// (the per-channel operand, e.g. Squeeze-Excitation's scale): the general
// broadcast walk would make every 16 floats a row of its own. s is repeated
// over a few pixels so that the vector kernel takes runs of them.
void PerChannelPlanes(VecBinaryOp op, const float* x, const float* s, float* y, int64_t pixels,
                      int64_t planes_per_image, bool s_per_image, bool scale_first, int64_t begin, int64_t end) {
  constexpr int64_t kRun = 64;  // pixels per vector call
  const TensorVecTable& vec = TensorVec();
  float repeated[kRun * kChannelBlock];
  const int64_t run = std::min(kRun, pixels);
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* sv = s + (s_per_image ? plane : plane % planes_per_image) * kChannelBlock;
    for (int64_t p = 0; p < run; ++p) std::copy(sv, sv + kChannelBlock, repeated + p * kChannelBlock);
    const float* xp = x + plane * pixels * kChannelBlock;
    float* yp = y + plane * pixels * kChannelBlock;
    for (int64_t p = 0; p < pixels; p += run) {
      const int64_t n = std::min(run, pixels - p) * kChannelBlock;
      const float* xr = xp + p * kChannelBlock;
      if (scale_first) {
        vec.binary(op, repeated, 1, xr, 1, yp + p * kChannelBlock, n);
      } else {
        vec.binary(op, xr, 1, repeated, 1, yp + p * kChannelBlock, n);
      }
    }
  }
}

// The per-channel kernel when one operand is the whole output and the other
// one 16-channel vector per block ([N|1, C/16, 1, 1, 16]); else nothing.
std::optional<TensorKernel> PerChannelKernel(VecBinaryOp op, const BlockedOperand& a, const BlockedOperand& b,
                                             const std::vector<int64_t>& out) {
  const std::vector<int64_t> full = BlockedDims(out);
  const auto per_channel = [&](const BlockedOperand& o) {
    return o.dims[1] == full[1] && o.dims[2] == 1 && o.dims[3] == 1 && o.dims[4] == kChannelBlock &&
           (o.dims[0] == 1 || o.dims[0] == full[0]);
  };
  const bool scale_first = per_channel(a) && b.dims == full;
  if (!scale_first && !(per_channel(b) && a.dims == full)) return std::nullopt;
  const BlockedOperand& x = scale_first ? b : a;
  const BlockedOperand& s = scale_first ? a : b;
  const int64_t pixels = out[2] * out[3], blocks = full[1], planes = out[0] * blocks;
  const bool s_per_image = s.dims[0] == full[0];
  TensorKernel k;
  k.impl = "kiln-per-channel-nchw16c";
  k.run = [=](const TensorCall& call) {
    const float* px =
        x.packed ? x.packed->data() : static_cast<const float*>(call.inputs[scale_first ? 1 : 0]);
    const float* ps =
        s.packed ? s.packed->data() : static_cast<const float*>(call.inputs[scale_first ? 0 : 1]);
    float* y = static_cast<float*>(call.outputs[0]);
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, pixels * kChannelBlock));
    SplitRanges(call.pool, planes, grain, [&](int64_t begin, int64_t end) {
      PerChannelPlanes(op, px, ps, y, pixels, blocks, s_per_image, scale_first, begin, end);
    });
    // The padding: 0 op 0 is 0 except for Div.
    if (op == VecBinaryOp::kDiv) ZeroChannelPadding(y, out[0], out[1], pixels);
    return Status::Ok();
  };
  return k;
}

}  // namespace

bool BinaryTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || !BinaryOpFor(args.op_type)) return false;
  if (args.inputs.size() != 2 || args.outputs.size() != 1 || !IsF32Rank4(args.outputs[0])) return false;
  return OperandFor(args, 0).has_value() && OperandFor(args, 1).has_value();
}

Expected<TensorKernel> MakeBlockedBinary(const TensorKernelArgs& args) {
  if (!BinaryTakesLayout(TensorLayout::kNCHW16c, args)) {
    return Unsupported(
        "{} {}: nchw16c activations need f32 operands of the output's dims, per channel, or single values",
        args.op_type, args.node);
  }
  const VecBinaryOp op = *BinaryOpFor(args.op_type);
  const BlockedOperand a = *OperandFor(args, 0), b = *OperandFor(args, 1);
  const std::vector<int64_t> out = args.outputs[0].dims;
  if (auto k = PerChannelKernel(op, a, b, out)) return *std::move(k);
  auto plan = std::make_shared<const BroadcastPlan>(MakeBroadcastPlan(BlockedDims(out), {a.dims, b.dims}));
  // A single value or a per-pixel constant reaches the padding too (and 0 / 0 is NaN).
  const bool zero_padding =
      out[1] % kChannelBlock != 0 && (op == VecBinaryOp::kDiv || a.dims[4] == 1 || b.dims[4] == 1);
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(TensorVec().isa) + "-nchw16c";
  k.run = [plan, op, a, b, out, zero_padding](const TensorCall& call) {
    const float* pa = a.packed ? a.packed->data() : static_cast<const float*>(call.inputs[0]);
    const float* pb = b.packed ? b.packed->data() : static_cast<const float*>(call.inputs[1]);
    float* y = static_cast<float*>(call.outputs[0]);
    const TensorVecTable& vec = TensorVec();
    const BroadcastPlan& p = *plan;
    ForEachBroadcastRow(call.pool, p, [&](int64_t r, const BroadcastCursor& c, int64_t begin, int64_t end) {
      vec.binary(op, pa + c.offset(0) + begin * p.step[0], p.step[0], pb + c.offset(1) + begin * p.step[1],
                 p.step[1], y + r * p.inner + begin, end - begin);
    });
    if (zero_padding) ZeroChannelPadding(y, out[0], out[1], out[2] * out[3]);
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
