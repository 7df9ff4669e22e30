// The CPU's kernels of the convolution family: Conv, kiln.FusedConv,
// ConvTranspose (here) and the pools (pooling.cc). MatMul, Gemm and Einsum
// register in mm_kernels.cc.
//
// ConvTranspose runs as the GEMM of kiln's convolution plus a scatter
// (conv_transpose_plan.h), or the reference loops.
// A Conv runs one of: kiln's own vector kernels (conv2d_plan.h: GEMM over
// packed weights, a depthwise loop), oneDNN (conv_onednn.h), or the direct
// reference (conv_reference.h, for 3-d, weights known only at run time, and
// machines without AVX2). On AVX-512, dense convolutions of 20 MFLOP and more
// run on oneDNN's nChw16c kernels with NCHW reordered in and out
// (PreferOneDnnBlocked). KILN_CONV=kiln|onednn|onednn-blocked|onednn-winograd|reference
// forces one where it applies (benchmarks, tests); otherwise the faster for
// the shape runs.
// No kernel here takes an output that aliases one of its inputs (the
// residual included): the GEMM writes partial sums before it reads the
// residual.
// The attribute activation_layout = "nchw16c" | "nhwc" (the layout stage's
// choice, TensorLayoutName's spelling) makes input, output and residual
// that layout; those run on oneDNN, or on kiln's nchw16c kernels
// (conv_nchw16c.h) for depthwise and small 1x1 convolutions, stems and the
// 3x3 layers where kiln's loop beats oneDNN's (PreferKilnBlockedConv); a
// stem with input_layout = "row-major" reads its input so. Conv says it
// takes nchw16c where one of those has a vector kernel for it
// (ConvTakesLayout).
// The attribute compute_dtype = "bf16" (the precision policy's choice,
// bf16_compute.h) runs a convolution on oneDNN's bf16 kernels where it can.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "backend/cpu/kernels/isa.h"
#include "backend/cpu/tensor_kernels/bf16_compute.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/conv2d_plan.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_onednn.h"
#include "backend/cpu/tensor_kernels/conv_reference.h"
#include "backend/cpu/tensor_kernels/conv_transpose_plan.h"
#include "backend/cpu/tensor_kernels/pooling.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

Status CheckF32(const TensorKernelArgs& args) {
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.has(i) && args.inputs[i].dtype != DType::kF32) {
      return Unsupported("{} {}: dtype {} not supported (f32 only)", args.op_type, args.node,
                         DTypeName(args.inputs[i].dtype));
    }
  }
  return Status::Ok();
}

std::string ForcedConvImpl() {
  const char* v = std::getenv("KILN_CONV");
  return v != nullptr ? std::string(v) : std::string();
}

const float* ConstantFloats(const TensorKernelArgs& args, size_t i) {
  return i < args.constants.size() && args.constants[i] != nullptr ? args.constants[i]->As<float>() : nullptr;
}

TensorKernel ReferenceConvKernel(const Window3& g, const FusedEpilogue& epilogue, bool has_bias,
                                 bool has_residual) {
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    const auto* w = static_cast<const float*>(call.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(call.inputs[2]) : nullptr;
    const float* residual = has_residual ? static_cast<const float*>(call.inputs[3]) : nullptr;
    ReferenceConv(g, x, w, bias, residual, epilogue, static_cast<float*>(call.outputs[0]));
    return Status::Ok();
  };
  return k;
}

// compute_dtype = "bf16" (bf16_compute.h): oneDNN's bf16 convolution where
// the CPU multiplies bf16, the weights are constant and oneDNN takes the
// shape; nullopt (run fp32) otherwise.
std::optional<TensorKernel> MakeBf16Conv(const Window3& g, const FusedEpilogue& epilogue, const float* w,
                                         const float* bias, bool has_residual, TensorLayout layout,
                                         const LaidOutSlot& slot) {
  if (w == nullptr || !CpuMultipliesBf16() || !OneDnnConvApplies(g, BestIsa())) return std::nullopt;
  // Empty tensors: oneDNN would write nothing; the fp32 paths handle them.
  if (g.batch * g.in_channels * g.out_channels * g.InPixels() * g.OutPixels() == 0) return std::nullopt;
  auto conv = MakeOneDnnConv(g, epilogue, w, bias, has_residual, layout, false, DType::kBF16, false, slot);
  if (!conv.ok()) return std::nullopt;
  return std::move(*conv);
}

Expected<TensorKernel> MakeConv(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(CheckF32(args));
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry, ConvGeometry(args.op_type, args.node, args.a(),
                                                              args.inputs[0].dims, args.inputs[1].dims));
  if (geometry.spatial > 3) {
    return Unsupported("{} {}: {} spatial axes (1 to 3 supported)", args.op_type, args.node,
                       geometry.spatial);
  }
  FusedEpilogue epilogue;
  if (args.op_type == "kiln.FusedConv") {
    KILN_ASSIGN_OR_RETURN(epilogue, ParseFusedEpilogue(args.op_type, args.node, args.a()));
  }
  const Window3 g = ToWindow3(geometry);
  const bool has_bias = args.has(2), has_residual = args.has(3);
  const float* w = ConstantFloats(args, 1);
  const float* bias = has_bias ? ConstantFloats(args, 2) : nullptr;
  const bool packable = w != nullptr && (!has_bias || bias != nullptr);
  const std::string forced = ForcedConvImpl();
  const LaidOutSlot slot{args.laid_out, args.node};
  KILN_ASSIGN_OR_RETURN(bool bf16, WantsBf16Compute(args));
  // Activations the layout stage keeps blocked or channels-last run on oneDNN
  // (nchw16c with channel counts not a multiple of 16 included: oneDNN pads them).
  KILN_ASSIGN_OR_RETURN(TensorLayout layout, NodeActivationLayout(args));
  // A stem the layout stage lets read its input row-major (ConvReadsRowMajorInput);
  // fp32 whatever the precision policy (3 input channels: few products to save).
  if (layout == TensorLayout::kNCHW16c && args.a().Has("input_layout")) {
    const BlockedConvShape shape = KilnBlockedConvShape(g, BestIsa());
    if (!packable || shape != BlockedConvShape::kStem) {
      return Unsupported("{} {}: a row-major input with nchw16c output needs kiln's stem kernel",
                         args.op_type, args.node);
    }
    // oneDNN's jit kernel for nchw src and nChw16c dst, but kiln's where it
    // was measured faster (PreferKilnStem), when asked (KILN_CONV=kiln) or
    // where oneDNN refuses.
    if (forced != "kiln" && (forced == "onednn" || !PreferKilnStem(g))) {
      auto conv = MakeOneDnnConv(g, epilogue, w, bias, has_residual, layout, false, DType::kF32, true, slot);
      if (conv.ok()) return conv;
    }
    return MakeKilnBlockedConvKernel(g, shape, epilogue, w, bias, has_residual, true, args.num_threads, slot);
  }
  if (layout != TensorLayout::kRowMajor) {
    if (!packable || !OneDnnConvApplies(g, BestIsa())) {
      return Unsupported("{} {}: activations in {} need constant weights, a 1-d or 2-d convolution and AVX2",
                         args.op_type, args.node, TensorLayoutName(layout));
    }
    // oneDNN's Winograd kernel where it beats kiln's loop and its own direct one
    // (PreferOneDnnWinograd), fp32 only; KILN_CONV=onednn-winograd forces it
    // where oneDNN has it.
    const bool winograd = layout == TensorLayout::kNCHW16c &&
                          (forced == "onednn-winograd" ||
                           (forced.empty() && !bf16 && PreferOneDnnWinograd(g, epilogue, BestIsa())));
    if (winograd) {
      auto conv =
          MakeOneDnnConv(g, epilogue, w, bias, has_residual, layout, false, DType::kF32, false, slot, true);
      if (conv.ok()) return conv;
    }
    // kiln's own nchw16c kernels where they beat oneDNN's (conv_nchw16c.h):
    // depthwise, small 1x1 layers and some 3x3 ones. KILN_CONV=kiln|onednn forces.
    // They run fp32 even where the policy asks bf16: oneDNN's call costs more
    // there than bf16 products save (MobileNetV3-Small in bf16, fastest of 40
    // runs: 2.6-3.0 ms with them on oneDNN bf16, 2.1-2.4 ms on kiln's fp32).
    // Not the dense 3x3 layers: those are big enough for bf16 products to pay.
    if (layout == TensorLayout::kNCHW16c && forced != "onednn" && forced != "onednn-blocked") {
      const BlockedConvShape shape = KilnBlockedConvShape(g, BestIsa());
      const bool bf16_pays = bf16 && shape == BlockedConvShape::kDense3x3 && CpuMultipliesBf16();
      if (shape != BlockedConvShape::kNone &&
          (forced == "kiln" || (PreferKilnBlockedConv(g, BestIsa(), args.num_threads) && !bf16_pays)))
        return MakeKilnBlockedConvKernel(g, shape, epilogue, w, bias, has_residual, false, args.num_threads, slot);
    }
    if (bf16) {
      if (auto conv = MakeBf16Conv(g, epilogue, w, bias, has_residual, layout, slot)) return std::move(*conv);
    }
    return MakeOneDnnConv(g, epilogue, w, bias, has_residual, layout, false, DType::kF32, false, slot);
  }
  // KILN_CONV=kiln|reference forces an fp32 implementation over bf16.
  if (bf16 && packable && forced != "kiln" && forced != "reference") {
    if (auto conv = MakeBf16Conv(g, epilogue, w, bias, has_residual, TensorLayout::kRowMajor, slot))
      return std::move(*conv);
  }
  if (!packable || forced == "reference") return ReferenceConvKernel(g, epilogue, has_bias, has_residual);

  const Isa isa = BestIsa();
  const bool kiln_applies = ConvPlanApplies(g, isa);
  const bool onednn_applies = OneDnnConvApplies(g, isa);
  const bool blocked =
      onednn_applies && (forced == "onednn-blocked" ||
                         (forced.empty() && (PreferOneDnnBlocked(g, isa) || PreferOneDnnBlockedOnRowMajor(g, isa))));
  if (blocked) {
    auto conv = MakeOneDnnConv(g, epilogue, w, bias, has_residual, TensorLayout::kRowMajor, true, DType::kF32,
                               false, slot);
    if (conv.ok()) return conv;
  }
  bool use_onednn = onednn_applies && (forced == "onednn" || (forced != "kiln" && PreferOneDnn(g, isa)));
  if (!kiln_applies && !onednn_applies) return ReferenceConvKernel(g, epilogue, has_bias, has_residual);
  if (!kiln_applies) use_onednn = true;

  if (use_onednn) {
    auto conv = MakeOneDnnConv(g, epilogue, w, bias, has_residual, TensorLayout::kRowMajor, false, DType::kF32,
                               false, slot);
    if (conv.ok()) return conv;
    if (!kiln_applies) return ReferenceConvKernel(g, epilogue, has_bias, has_residual);
  }
  auto plan = std::make_shared<const ConvPlan>(MakeConvPlan(g, epilogue, w, bias, isa, args.num_threads, slot));
  const int threads = std::max(1, args.num_threads);
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(isa) +
           (plan->path == ConvPath::kDepthwise ? "-depthwise"
            : plan->path == ConvPath::kDirect  ? "-gemm-direct"
                                               : "-gemm");
  k.scratch_bytes = sizeof(float) * static_cast<size_t>(plan->ScratchFloats(threads));
  k.run = [plan, has_residual, threads](const TensorCall& call) {
    // More threads than the scratch was sized for run on the caller alone.
    ThreadPool* pool = call.pool != nullptr && call.pool->num_threads() <= threads ? call.pool : nullptr;
    RunConvPlan(*plan, static_cast<const float*>(call.inputs[0]),
                has_residual ? static_cast<const float*>(call.inputs[3]) : nullptr,
                static_cast<float*>(call.outputs[0]), reinterpret_cast<float*>(call.scratch), pool);
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeConvTranspose(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(CheckF32(args));
  KILN_ASSIGN_OR_RETURN(
      WindowGeometry geometry,
      ConvTransposeGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims, args.inputs[1].dims));
  if (geometry.spatial > 3) {
    return Unsupported("{} {}: {} spatial axes (1 to 3 supported)", args.op_type, args.node,
                       geometry.spatial);
  }
  const Window3 g = ToWindow3(geometry);
  const bool has_bias = args.has(2);
  const float* w = ConstantFloats(args, 1);
  const float* bias = has_bias ? ConstantFloats(args, 2) : nullptr;
  const Isa isa = BestIsa();
  if (w != nullptr && (!has_bias || bias != nullptr) && ConvTransposePlanApplies(g, isa) &&
      ForcedConvImpl() != "reference") {
    const int threads = std::max(1, args.num_threads);
    const LaidOutSlot slot{args.laid_out, args.node};
    auto plan =
        std::make_shared<const ConvTransposePlan>(MakeConvTransposePlan(g, w, bias, isa, threads, slot));
    TensorKernel k;
    k.impl = std::string("kiln-") + IsaName(isa) + "-gemm-col2im";
    k.scratch_bytes = sizeof(float) * static_cast<size_t>(plan->ScratchFloats(threads));
    k.run = [plan, threads](const TensorCall& call) {
      ThreadPool* pool = call.pool != nullptr && call.pool->num_threads() <= threads ? call.pool : nullptr;
      RunConvTransposePlan(*plan, static_cast<const float*>(call.inputs[0]),
                           static_cast<float*>(call.outputs[0]), reinterpret_cast<float*>(call.scratch),
                           pool);
      return Status::Ok();
    };
    return k;
  }
  TensorKernel k;
  k.impl = "reference";
  k.run = [g, has_bias](const TensorCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    const auto* w = static_cast<const float*>(call.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(call.inputs[2]) : nullptr;
    auto* y = static_cast<float*>(call.outputs[0]);
    const int64_t planes = g.batch * g.out_channels;
    if (call.pool == nullptr) {
      ReferenceConvTranspose(g, x, w, bias, y, 0, planes);
    } else {
      call.pool->ParallelFor(
          planes, 1, [&](int64_t b, int64_t e, int) { ReferenceConvTranspose(g, x, w, bias, y, b, e); });
    }
    return Status::Ok();
  };
  return k;
}

// nchw16c: where kiln's nchw16c kernels run the convolution, or oneDNN with
// one of its own fast kernels on those activations (its reference loops,
// which it falls back to for blocked layouts its vector kernels lack, e.g.
// grouped convolutions whose groups are not multiples of the block, are
// left to row-major).
bool ConvTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || !CheckF32(args).ok() || args.inputs[0].rank() != 4) return false;
  if (ConstantFloats(args, 1) == nullptr || (args.has(2) && ConstantFloats(args, 2) == nullptr)) return false;
  auto geometry = ConvGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims, args.inputs[1].dims);
  if (!geometry.ok() || geometry->spatial != 2) return false;
  FusedEpilogue epilogue;
  if (args.op_type == "kiln.FusedConv") {
    auto parsed = ParseFusedEpilogue(args.op_type, args.node, args.a());
    if (!parsed.ok()) return false;
    epilogue = *parsed;
  }
  const Window3 g = ToWindow3(*geometry);
  if (!OneDnnConvApplies(g, BestIsa())) return false;
  // kiln's nchw16c 1x1 kernel takes a 1x1 image (Squeeze-Excitation's two
  // products) as a matrix-vector product, so the block stays blocked.
  if (KilnBlockedConvShape(g, BestIsa()) != BlockedConvShape::kNone &&
      PreferKilnBlockedConv(g, BestIsa(), args.num_threads))
    return true;
  // Elsewhere a 1x1 image stays row-major: each oneDNN call costs tens of
  // microseconds there, kiln's row-major kernel a few.
  if (g.out[1] * g.out[2] == 1) return false;
  auto impl = OneDnnConvImplementation(g, epilogue, args.has(3), layout);
  return impl.ok() && impl->rfind("ref", 0) != 0;
}

}  // namespace

void AddConvKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::string conv_limits =
      "1-d and 2-d vectorized (3-d by the reference loops); f32; group, dilations, strides, pads, "
      "auto_pad NOTSET|SAME_UPPER|SAME_LOWER|VALID";
  kernels->push_back({"Conv", MakeConv, {DType::kF32}, conv_limits, ConvTakesLayout});
  kernels->push_back(
      {"kiln.FusedConv",
       MakeConv,
       {DType::kF32},
       conv_limits + "; activation Relu|LeakyRelu|Clip|HardSigmoid|HardSwish|Silu|Sigmoid|Tanh; residual",
       ConvTakesLayout});
  kernels->push_back(
      {"ConvTranspose",
       MakeConvTranspose,
       {DType::kF32},
       "1-d to 3-d; f32; group, dilations, strides, pads, output_padding, output_shape, auto_pad"});
  AddPoolKernels(kernels);
}

}  // namespace kiln::cpu
