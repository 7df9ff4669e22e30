// kiln's nchw16c convolutions: which shapes they take, the weight packing,
// the reference loops and the kernel. The vector loops are in
// conv_nchw16c_avx512.cc.
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/cpu_info.h"

namespace kiln::cpu {

// The layout's name for LaidOutWeights.
constexpr const char* kBlockedLayout = "kiln-nchw16c-blocks";
namespace {

constexpr int64_t kBlock = 16;

int64_t Blocks(int64_t c) {
  return (c + kBlock - 1) / kBlock;
}

BlockedConvShape ShapeOf(const Window3& g) {
  // 2-d only: the leading (depth) axis is 1.
  if (g.in[0] != 1 || g.kernel[0] != 1 || g.out[0] != 1 || g.pad_begin[0] != 0 || g.pad_end[0] != 0)
    return BlockedConvShape::kNone;
  if (g.dilation[1] != 1 || g.dilation[2] != 1) return BlockedConvShape::kNone;
  if (g.group == 1 && g.in_channels <= kStemMaxInChannels && g.kernel[1] * g.kernel[2] > 1)
    return BlockedConvShape::kStem;
  if (g.group == 1 && g.kernel[1] == 1 && g.kernel[2] == 1) {
    const bool no_pads = g.pad_begin[1] == 0 && g.pad_begin[2] == 0 && g.pad_end[1] == 0 && g.pad_end[2] == 0;
    const bool stride_ok = g.stride[1] == g.stride[2] && (g.stride[1] == 1 || g.stride[1] == 2);
    return no_pads && stride_ok ? BlockedConvShape::kPointwise : BlockedConvShape::kNone;
  }
  if (g.group > 1 && g.group == g.in_channels && g.group == g.out_channels)
    return BlockedConvShape::kDepthwise;
  if (g.group == 1 && g.kernel[1] == 3 && g.kernel[2] == 3 && g.stride[1] == g.stride[2] &&
      (g.stride[1] == 1 || g.stride[1] == 2))
    return BlockedConvShape::kDense3x3;
  return BlockedConvShape::kNone;
}

bool IsAmd(const CpuInfo& cpu) {
  return cpu.vendor == "AuthenticAMD";
}

// An AMD core of the Zen 5 class or later (CPUID family 26 and up), where
// kiln's dense 3x3 and stem loops were measured against oneDNN's.
bool IsZen5OrLater(const CpuInfo& cpu) {
  return IsAmd(cpu) && cpu.family >= 26;
}

}  // namespace

BlockedConvShape KilnBlockedConvShape(const Window3& g, Isa isa) {
  if (isa != Isa::kAvx512) return BlockedConvShape::kNone;
  return ShapeOf(g);
}

bool PreferKilnBlockedConv(const Window3& g, Isa isa, int threads) {
  const BlockedConvShape shape = KilnBlockedConvShape(g, isa);
  if (shape == BlockedConvShape::kDepthwise || shape == BlockedConvShape::kStem) return true;
  if (shape == BlockedConvShape::kDense3x3) {
    // Where kiln's loop beat oneDNN 2.6's jit:avx512_core, 2 threads, in
    // the model (`kiln bench latency --layers`, interleaved rounds;
    // bench/RESULTS.md):
    // - Intel's cores: ResNet-18's layers reading 56- and 28-wide images
    //   (64-128 channels, the 3x3/2 ones included; 0.82-1.03x oneDNN's time
    //   on an Ice Lake Xeon); its 14-wide 256-channel ones (0.86-0.89x on a
    //   Xeon with AMX, 1.07-1.09x on the Ice Lake Xeon before the tiles kept
    //   their sums in registers); YOLOv8n's 3x3/2 downsamples (0.70-1.0x on
    //   the Xeon with AMX; its stride-1 40-wide head layers took 1.1-1.2x).
    // - Every CPU: layer4's 7-wide 512-channel layers and the 3x3/2 into
    //   them (0.90-1.01x on an AMD EPYC of the Zen 4 class, two-row tiles).
    //   On Zen 4 it took 1.04-1.09x on the 56- and 28-wide ones, where
    //   oneDNN's FMAs with the input broadcast inside them beat its separate
    //   broadcast for every 2 FMAs.
    // - Zen 5: every ResNet-18 layer and SqueezeNet's 3x3 layers (0.75-0.91x;
    //   bench/micro/conv_nchw16c_bench.cc), YOLOv8n at 320 0.90x in all:
    //   every layer of two or more output blocks. With one (YOLOv8n's
    //   16-channel layers: 1.06-1.19x) its one weight vector a step leaves
    //   the loads, not the FMAs, the limit.
    const CpuInfo& cpu = GetCpuInfo();
    const bool intel = !IsAmd(cpu);
    const bool two_blocks = g.in_channels >= 16 && g.out_channels > 16;
    const bool rows_of_14 = intel && g.out[2] % 14 == 0;
    const bool wide = rows_of_14 && g.in[2] >= 28 && g.in_channels >= 64 && g.in_channels <= 128 &&
                      g.out_channels >= 64 && g.out_channels <= 256;
    const bool deep = rows_of_14 && g.in_channels == 256 && g.out_channels == 256;
    const bool strided = intel && g.stride[2] == 2 && two_blocks;
    const bool zen5 = IsZen5OrLater(cpu) && two_blocks;
    const bool narrow = g.out[2] <= 7 && g.in_channels >= 256 && g.out_channels >= 256;
    return wide || deep || strided || zen5 || narrow;
  }
  if (shape != BlockedConvShape::kPointwise) return false;
  // bench/micro/conv_nchw16c_bench.cc: on 2 threads oneDNN's jit_1x1 and
  // jit_dw cost 60-120 us a call on MobileNet/ShuffleNet's small layers
  // (waking its OpenMP team) where kiln's take 5-35, and kiln's 1x1 GEMM
  // still wins at the largest 1x1 measured (26 MFLOP: 240 us against 280).
  // On one thread oneDNN's 1x1 is 0-20 % faster than kiln's (ties below a
  // few MFLOP); its depthwise up to 2x, but kiln's nchw16c depthwise still
  // makes the whole of MobileNetV3-Small faster than row-major (5.0 -> 2.5
  // ms), as it lets the chains exist. Larger 1x1 layers stay on oneDNN.
  // On an Intel Xeon with AMX, where kiln's kernels and oneDNN's share one
  // OpenMP team, oneDNN's 1x1 took 0.67-0.92x kiln's time from 6 MFLOP up
  // (YOLOv8n's 13-26 MFLOP layers, ResNet's 1x1/2 downsamples, the 56- and
  // 55-wide ones of MobileNetV3 and SqueezeNet) and tied below: there 6
  // MFLOP is the limit (YOLOv8n 0.98-0.99x the time, SqueezeNet 0.99x).
  const double flops = 2.0 * static_cast<double>(g.batch * g.in_channels * g.out_channels * g.OutPixels());
  const double most = IsAmd(GetCpuInfo()) ? 32e6 : 6e6;
  return flops <= (threads > 1 ? most : 4e6);
}

bool PreferKilnStem(const Window3& g) {
  // ResNet-18's 7x7/2 stem in the model, 2 threads, on an AMD EPYC of the
  // Zen 5 class: 0.66-0.69 ms on kiln's kernel against 0.70-0.78 on
  // oneDNN's (bench/RESULTS.md). On the 3x3/2 stems of SqueezeNet,
  // MobileNetV3, ShuffleNet and YOLOv8n oneDNN's takes 0.5-0.85x kiln's time
  // there (bench/micro/conv_stem_bench.cc), and it was faster on every stem
  // on the CPUs measured before.
  return IsZen5OrLater(GetCpuInfo()) && g.kernel[1] >= 7 && g.kernel[2] >= 7;
}

BlockedConvPlan MakeBlockedConvPlan(const Window3& g, BlockedConvShape shape, const FusedEpilogue& epilogue,
                                    const float* w, const float* bias, bool input_row_major,
                                    const LaidOutSlot& slot) {
  BlockedConvPlan p;
  p.g = g;
  p.shape = shape;
  p.epilogue = epilogue;
  p.in_blocks = Blocks(g.in_channels);
  p.out_blocks = Blocks(g.out_channels);
  p.input_row_major = input_row_major && shape == BlockedConvShape::kStem;
  p.bias.assign(static_cast<size_t>(p.out_blocks * kBlock), 0.0f);
  if (bias != nullptr) std::memcpy(p.bias.data(), bias, sizeof(float) * static_cast<size_t>(g.out_channels));
  const int64_t window = g.kernel[1] * g.kernel[2];
  const auto floats = static_cast<size_t>(
      shape == BlockedConvShape::kPointwise  ? p.out_blocks * p.in_blocks * kBlock * kBlock
      : shape == BlockedConvShape::kDense3x3 ? p.out_blocks * p.in_blocks * 9 * kBlock * kBlock
      : shape == BlockedConvShape::kStem     ? p.out_blocks * g.in_channels * window * kBlock
                                             : p.in_blocks * window * kBlock);
  if (slot.Adopt(kBlockedLayout, floats, &p.weights)) return p;
  if (shape == BlockedConvShape::kPointwise) {
    const int64_t c = g.in_channels;
    p.weights.assign(static_cast<size_t>(p.out_blocks * p.in_blocks * kBlock * kBlock), 0.0f);
    for (int64_t m = 0; m < g.out_channels; ++m)
      for (int64_t ci = 0; ci < c; ++ci)
        p.weights[static_cast<size_t>(
            ((m / kBlock * p.in_blocks + ci / kBlock) * kBlock + ci % kBlock) * kBlock + m % kBlock)] =
            w[m * c + ci];
  } else if (shape == BlockedConvShape::kDense3x3) {
    const int64_t c = g.in_channels;
    p.weights.assign(static_cast<size_t>(p.out_blocks * p.in_blocks * 9 * kBlock * kBlock), 0.0f);
    for (int64_t m = 0; m < g.out_channels; ++m)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t t = 0; t < 9; ++t)
          p.weights[static_cast<size_t>(
              (((m / kBlock * p.in_blocks + ci / kBlock) * 9 + t) * kBlock + ci % kBlock) * kBlock +
              m % kBlock)] = w[(m * c + ci) * 9 + t];
  } else if (shape == BlockedConvShape::kStem) {
    const int64_t taps = g.in_channels * g.kernel[1] * g.kernel[2];
    p.weights.assign(static_cast<size_t>(p.out_blocks * taps * kBlock), 0.0f);
    for (int64_t m = 0; m < g.out_channels; ++m)
      for (int64_t t = 0; t < taps; ++t)
        p.weights[static_cast<size_t>((m / kBlock * taps + t) * kBlock + m % kBlock)] = w[m * taps + t];
  } else {
    const int64_t taps = g.kernel[1] * g.kernel[2];
    p.weights.assign(static_cast<size_t>(p.in_blocks * taps * kBlock), 0.0f);
    for (int64_t ch = 0; ch < g.in_channels; ++ch)
      for (int64_t t = 0; t < taps; ++t)
        p.weights[static_cast<size_t>((ch / kBlock * taps + t) * kBlock + ch % kBlock)] = w[ch * taps + t];
  }
  slot.Record(kBlockedLayout, p.weights);
  return p;
}

void RunBlockedConvReference(const BlockedConvPlan& p, const float* x, const float* residual, float* y) {
  const Window3& g = p.g;
  const int64_t ih = g.in[1], iw = g.in[2], oh = g.out[1], ow = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2], sh = g.stride[1], sw = g.stride[2];
  const int64_t ph = g.pad_begin[1], pw = g.pad_begin[2];
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t ob = 0; ob < p.out_blocks; ++ob)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t col = 0; col < ow; ++col)
          for (int64_t lane = 0; lane < kBlock; ++lane) {
            const int64_t m = ob * kBlock + lane;
            float acc = 0.0f;
            if (p.shape == BlockedConvShape::kPointwise) {
              for (int64_t cb = 0; cb < p.in_blocks; ++cb)
                for (int64_t i = 0; i < kBlock; ++i)
                  acc +=
                      x[(((n * p.in_blocks + cb) * ih + r * sh) * iw + col * sw) * kBlock + i] *
                      p.weights[static_cast<size_t>(((ob * p.in_blocks + cb) * kBlock + i) * kBlock + lane)];
            } else if (p.shape == BlockedConvShape::kDense3x3) {
              for (int64_t cb = 0; cb < p.in_blocks; ++cb)
                for (int64_t a = 0; a < 3; ++a)
                  for (int64_t b = 0; b < 3; ++b) {
                    const int64_t yy = r * sh - ph + a, xx = col * sw - pw + b;
                    if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
                    for (int64_t i = 0; i < kBlock; ++i)
                      acc += x[(((n * p.in_blocks + cb) * ih + yy) * iw + xx) * kBlock + i] *
                             p.weights[static_cast<size_t>(
                                 (((ob * p.in_blocks + cb) * 9 + a * 3 + b) * kBlock + i) * kBlock + lane)];
                  }
            } else if (p.shape == BlockedConvShape::kStem) {
              for (int64_t c = 0; c < g.in_channels; ++c)
                for (int64_t a = 0; a < kh; ++a)
                  for (int64_t b = 0; b < kw; ++b) {
                    const int64_t yy = r * sh - ph + a, xx = col * sw - pw + b;
                    if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
                    const float xv = p.input_row_major ? x[((n * g.in_channels + c) * ih + yy) * iw + xx]
                                                       : x[((n * ih + yy) * iw + xx) * kBlock + c];
                    acc += xv * p.weights[static_cast<size_t>(
                                    ((ob * g.in_channels + c) * kh * kw + a * kw + b) * kBlock + lane)];
                  }
            } else {
              for (int64_t a = 0; a < kh; ++a)
                for (int64_t b = 0; b < kw; ++b) {
                  const int64_t yy = r * sh - ph + a, xx = col * sw - pw + b;
                  if (yy < 0 || yy >= ih || xx < 0 || xx >= iw) continue;
                  acc += x[(((n * p.in_blocks + ob) * ih + yy) * iw + xx) * kBlock + lane] *
                         p.weights[static_cast<size_t>((ob * kh * kw + a * kw + b) * kBlock + lane)];
                }
            }
            const int64_t at = (((n * p.out_blocks + ob) * oh + r) * ow + col) * kBlock + lane;
            if (m >= g.out_channels) {
              y[at] = 0.0f;
              continue;
            }
            float v = acc + p.bias[static_cast<size_t>(m)];
            if (residual == nullptr) {
              v = ApplyFusedActivation(p.epilogue, v);
            } else if (p.epilogue.residual_before_activation) {
              v = ApplyFusedActivation(p.epilogue, v + residual[at]);
            } else {
              v = ApplyFusedActivation(p.epilogue, v) + residual[at];
            }
            y[at] = v;
          }
}

TensorKernel MakeKilnBlockedConvKernel(const Window3& g, BlockedConvShape shape,
                                       const FusedEpilogue& epilogue, const float* w, const float* bias,
                                       bool has_residual, bool input_row_major, int threads,
                                       const LaidOutSlot& slot) {
  auto plan = std::make_shared<const BlockedConvPlan>(
      MakeBlockedConvPlan(g, shape, epilogue, w, bias, input_row_major, slot));
  TensorKernel k;
  k.impl = shape == BlockedConvShape::kPointwise  ? "kiln-avx512-nchw16c-1x1"
           : shape == BlockedConvShape::kDense3x3 ? "kiln-avx512-nchw16c-3x3"
           : shape == BlockedConvShape::kStem
               ? (plan->input_row_major ? "kiln-avx512-nchw-to-nchw16c-stem" : "kiln-avx512-nchw16c-stem")
               : "kiln-avx512-nchw16c-depthwise";
  threads = std::max(1, threads);
  k.scratch_bytes = sizeof(float) * static_cast<size_t>(BlockedConvScratchFloats(*plan, threads));
  k.run = [plan, has_residual, threads](const TensorCall& call) {
    RunBlockedConvAvx512(*plan, static_cast<const float*>(call.inputs[0]),
                         has_residual ? static_cast<const float*>(call.inputs[3]) : nullptr,
                         static_cast<float*>(call.outputs[0]), call.pool,
                         reinterpret_cast<float*>(call.scratch), threads);
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
