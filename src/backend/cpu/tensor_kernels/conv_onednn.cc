// oneDNN convolutions (see conv_onednn.h).
#include "backend/cpu/tensor_kernels/conv_onednn.h"
#include "backend/cpu/tensor_kernels/onednn_runtime.h"

#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"
#include "core/thread_pool.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace kiln::cpu {
namespace {

// One CPU engine for the process; oneDNN's ISA capped at kiln's (KILN_ISA)
// before the first primitive exists.
dnnl::engine& Engine() {
  static dnnl::engine* engine = [] {
    if (BestIsa() == Isa::kAvx2) {
      try {
        dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
      } catch (const dnnl::error&) {
        // Too late: another part of the process made a primitive first.
      }
    }
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *engine;
}

void AppendActivation(const FusedEpilogue& e, dnnl::post_ops* ops) {
  using A = dnnl::algorithm;
  switch (e.activation) {
    case FusedActivation::kNone: break;
    case FusedActivation::kRelu: ops->append_eltwise(1.0f, A::eltwise_relu, 0.0f, 0.0f); break;
    case FusedActivation::kLeakyRelu: ops->append_eltwise(1.0f, A::eltwise_relu, e.alpha, 0.0f); break;
    case FusedActivation::kClip: ops->append_eltwise(1.0f, A::eltwise_clip_v2, e.alpha, e.beta); break;
    case FusedActivation::kHardSigmoid:
      ops->append_eltwise(1.0f, A::eltwise_linear, e.alpha, e.beta);
      ops->append_eltwise(1.0f, A::eltwise_clip_v2, 0.0f, 1.0f);
      break;
    case FusedActivation::kHardSwish: ops->append_eltwise(1.0f, A::eltwise_hardswish, 0.0f, 0.0f); break;
    case FusedActivation::kSilu: ops->append_eltwise(1.0f, A::eltwise_swish, 1.0f, 0.0f); break;
    case FusedActivation::kSigmoid: ops->append_eltwise(1.0f, A::eltwise_logistic, 0.0f, 0.0f); break;
    case FusedActivation::kTanh: ops->append_eltwise(1.0f, A::eltwise_tanh, 0.0f, 0.0f); break;
  }
}

struct OneDnnConv {
  dnnl::memory::desc src, dst, weights_desc;
  dnnl::memory weights, bias;
  dnnl::convolution_forward primitive;
  size_t dst_bytes = 0;
  bool has_residual = false;
  // The residual added after the activation by kiln rather than by a `sum`
  // post-op (oneDNN's vector kernels take no sum after an eltwise post-op).
  bool residual_added_after = false;
  // Blocked internally: the user's NCHW tensors (src, dst) reordered to and
  // from the layout the primitive chose (conv_src, conv_dst) in the scratch.
  bool blocked = false;
  dnnl::memory::desc conv_src, conv_dst;
  dnnl::reorder src_in, dst_out, residual_in;  // empty where no reorder is needed
  size_t src_scratch = 0, dst_scratch = 0;     // bytes, each rounded to 64
};

// y += the residual (input 3), for a residual added after the activation.
// Every float of the buffer, padding included (zero plus zero).
void AddResidualAfter(const OneDnnConv& conv, const TensorCall& call, float* y) {
  const auto* r = static_cast<const float*>(call.inputs[3]);
  SplitRanges(call.pool, static_cast<int64_t>(conv.dst_bytes / sizeof(float)), kParallelGrain,
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) y[i] += r[i];
              });
}

size_t Round64(size_t n) { return (n + 63) / 64 * 64; }

// oneDNN's OpenMP team sized to the call's pool. libgomp comes with libdnnl;
// it is looked up rather than linked so that kiln itself needs no OpenMP.
void SetOneDnnThreads(int threads) {
  using Fn = void (*)(int);
  static Fn set = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  static thread_local int current = -1;
  if (set != nullptr && threads != current) {
    set(threads);
    current = threads;
  }
}

// The smallest convolution (in FLOPs) that runs blocked on oneDNN by default.
constexpr double kOneDnnBlockedMinFlops = 20e6;

}  // namespace

dnnl::engine& OneDnnEngine() {
  return Engine();
}
void SetOneDnnThreadCount(int threads) {
  SetOneDnnThreads(threads);
}

bool OneDnnConvApplies(const Window3& g, Isa isa) {
  return (isa == Isa::kAvx2 || isa == Isa::kAvx512) && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1;
}

// Measured with bench/micro/conv_bench.cc on Zen 4 (AVX-512, 2 cores):
// kiln's kernels beat oneDNN 2.6 on every layer measured (ResNet 3x3 and
// 1x1, the 7x7/2 stem, a YOLO 3x3/2, depthwise 3x3 and 3x3/2), by 2-10x
// against oneDNN on NCHW (its gemm:jit path) and 1.2-18x against its
// blocked brgconv, so oneDNN on NCHW runs only when asked (KILN_CONV=onednn).
// Its direct nChw16c kernels are another matter: PreferOneDnnBlocked.
bool PreferOneDnn(const Window3& g, Isa isa) {
  (void)g;
  (void)isa;
  return false;
}

// Measured on whole models (Zen 4, AVX-512, 2 threads): oneDNN's nChw16c
// direct kernels, reorders included, beat kiln's NCHW GEMM on the dense
// convolutions of ResNet-18 and YOLOv8n; on small layers the reorders and the
// OpenMP hand-off cost more than they win, and depthwise layers are left to
// kiln's own loop.
bool PreferOneDnnBlocked(const Window3& g, Isa isa) {
  if (isa != Isa::kAvx512 || g.group != 1) return false;
  const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.out_channels) *
                       static_cast<double>(g.out[1] * g.out[2]) * static_cast<double>(g.in_channels) *
                       static_cast<double>(g.kernel[1] * g.kernel[2]);
  return flops >= kOneDnnBlockedMinFlops;
}

bool WinogradFusesActivation(const FusedEpilogue& e) {
  return e.activation == FusedActivation::kNone || e.activation == FusedActivation::kRelu;
}

bool PreferOneDnnWinograd(const Window3& g, const FusedEpilogue& e, Isa isa) {
  // oneDNN's jit_fp32_wino_2x3 (AVX-512 only), Winograd's F(2x2, 3x3),
  // computes 2x2 outputs from a 4x4 input tile in 16 products per channel
  // pair, where the direct loops need 36: 2.25x fewer FMAs, for transforms
  // of the input and the output and weights 16/9 the size.
  // bench/micro/conv_nchw16c_bench.cc, 2 threads, on an Intel Xeon with AMX:
  // 0.53-0.57x the time of kiln's loop on ResNet-18's 56-, 28- and 14-wide
  // layers, 0.70-0.77x on SqueezeNet's (16-64 input channels, 13-55 wide),
  // 0.48-0.66x on YOLOv8n's with 32-128 channels (10-80 wide); no gain on a
  // 7-wide image (ResNet's layer4: 0.93x in the loop, level in the model),
  // and a loss with one block of 16 channels in and out (1.1x oneDNN's
  // direct kernel). Other AVX-512 CPUs take it on the same count of
  // products; it was not measured there.
  // Its kernel fuses no activation but ReLU (and the residual as a sum);
  // the others, run as a pass of their own after it, cost more than it
  // saved (YOLOv8n, all SiLU, took 1.1-1.25x the time in the model).
  if (isa != Isa::kAvx512 || !WinogradFusesActivation(e) || g.group != 1 || g.kernel[1] != 3 ||
      g.kernel[2] != 3)
    return false;
  if (g.stride[1] != 1 || g.stride[2] != 1 || g.dilation[1] != 1 || g.dilation[2] != 1) return false;
  return g.out_channels > 16 && g.out[1] >= 8 && g.out[2] >= 8;
}

// Measured in the YOLOv8n-style detector at 320 with KILN_ISA=avx2 (Intel
// Xeon, 2 threads, `kiln bench latency --layers`): oneDNN's jit:avx2 on
// nChw8c, its reorders included, took every dense convolution with a window
// larger than 1x1 in 0.55-0.85x the time of kiln's direct AVX2 loop (the
// 3x3/2 layers 59 MFLOP: 0.56-0.73 ms against 0.85-1.28; the head's 3x3
// 118-184 MFLOP: 62-78 % of the AVX2 peak against 46-50 %), down to 7 MFLOP;
// the whole model 27.6 ms against 38.7. kiln's GEMM keeps the 1x1 layers,
// which it reads in place (ties or wins there). On AVX-512 the layout stage
// chains these layers in nchw16c instead (PreferOneDnnBlocked).
bool PreferOneDnnBlockedOnRowMajor(const Window3& g, Isa isa) {
  if (isa != Isa::kAvx2 || g.group != 1 || g.kernel[1] * g.kernel[2] == 1) return false;
  const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.out_channels) *
                       static_cast<double>(g.out[1] * g.out[2]) * static_cast<double>(g.in_channels) *
                       static_cast<double>(g.kernel[1] * g.kernel[2]);
  return flops >= 2e6;
}

namespace {

// The primitive's description: activations in `layout` (or, blocked
// internally, in the layout the primitive picks), weights in the layout it
// picks, and the epilogue as post-ops.
struct ConvDescs {
  dnnl::memory::desc src, dst, b_desc;
  dnnl::memory::dims w_dims;
  bool grouped = false, blocked = false;
  bool residual_added_after = false;  // see OneDnnConv
  dnnl::convolution_forward::primitive_desc pd;
};

ConvDescs DescribeConv(const Window3& g, const FusedEpilogue& epilogue, bool has_residual,
                       TensorLayout layout, bool blocked_internally, DType compute = DType::kF32,
                       bool src_row_major = false, bool winograd = false) {
  using dnnl::memory;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  dnnl::engine& engine = Engine();
  ConvDescs d;
  const memory::dims src_dims = {g.batch, g.in_channels, g.in[1], g.in[2]};
  const memory::dims dst_dims = {g.batch, g.out_channels, g.out[1], g.out[2]};
  d.grouped = g.group > 1;
  d.w_dims = d.grouped ? memory::dims{g.group, g.GroupOut(), g.GroupIn(), g.kernel[1], g.kernel[2]}
                       : memory::dims{g.out_channels, g.in_channels, g.kernel[1], g.kernel[2]};
  // nChw16c on channel counts that are not multiples of 16 pads them (the
  // descriptor's padded_dims), which the nchw16c layout's buffers hold.
  const tag activations = layout == TensorLayout::kNCHW16c ? tag::nChw16c
                          : layout == TensorLayout::kNHWC  ? tag::nhwc
                                                           : tag::nchw;
  d.src = memory::desc(src_dims, dt::f32, src_row_major ? tag::nchw : activations);
  d.dst = memory::desc(dst_dims, dt::f32, activations);
  d.b_desc = memory::desc({g.out_channels}, dt::f32, tag::x);
  const memory::dims strides = {g.stride[1], g.stride[2]};
  // oneDNN counts dilation from 0 (no gap), ONNX from 1.
  const memory::dims dilates = {g.dilation[1] - 1, g.dilation[2] - 1};
  const memory::dims pad_l = {g.pad_begin[1], g.pad_begin[2]}, pad_r = {g.pad_end[1], g.pad_end[2]};
  // bf16: src reordered to bf16 in the scratch each call (in the layout
  // the primitive reads), weights bf16, dst and accumulation f32.
  const bool bf16 = compute == DType::kBF16;
  const dt compute_dt = bf16 ? dt::bf16 : dt::f32;
  d.blocked = (blocked_internally && layout == TensorLayout::kRowMajor) || bf16;
  const bool internal_layout = d.blocked && layout == TensorLayout::kRowMajor;
  const memory::desc w_any(d.w_dims, compute_dt, tag::any);
  // nChw16c, where oneDNN's direct AVX-512 kernels are fastest (its choice
  // for `any` is NHWC brgconv, slower on these shapes); a stem with
  // fewer than 16 input channels reads NCHW as it is.
  const tag blocked_tag = BestIsa() == Isa::kAvx512 ? tag::nChw16c : tag::nChw8c;
  const memory::desc conv_src_any(src_dims, compute_dt,
                                  !internal_layout     ? (src_row_major ? tag::nchw : activations)
                                  : g.in_channels < 16 ? tag::nchw
                                                       : blocked_tag),
      conv_dst_any(dst_dims, dt::f32, internal_layout ? blocked_tag : activations);
  const dnnl::algorithm algorithm =
      winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm,
                                       d.blocked ? conv_src_any : d.src, w_any, d.b_desc,
                                       d.blocked ? conv_dst_any : d.dst, strides, dilates, pad_l, pad_r);
  dnnl::post_ops ops;
  // The residual is copied into the output first; `sum` adds it where the
  // epilogue says. After an activation, on activations the layout stage
  // keeps blocked or channels-last, kiln adds it after the primitive.
  d.residual_added_after = has_residual && !epilogue.residual_before_activation &&
                           epilogue.activation != FusedActivation::kNone && layout != TensorLayout::kRowMajor;
  if (has_residual && epilogue.residual_before_activation) ops.append_sum(1.0f);
  AppendActivation(epilogue, &ops);
  if (has_residual && !epilogue.residual_before_activation && !d.residual_added_after) ops.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  d.pd = dnnl::convolution_forward::primitive_desc(desc, attr, engine);
  return d;
}

}  // namespace

Expected<std::string> OneDnnConvImplementation(const Window3& g, const FusedEpilogue& epilogue,
                                               bool has_residual, TensorLayout layout) {
  try {
    return std::string(DescribeConv(g, epilogue, has_residual, layout, false).pd.impl_info_str());
  } catch (const dnnl::error& e) {
    return Unsupported("oneDNN does not take this convolution: {}", e.what());
  }
}

std::string OneDnnWeightsLayoutName(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  std::string s = fmt::format("onednn:{}:{}", static_cast<int>(d.data_type), static_cast<int>(d.format_kind));
  for (int i = 0; i < d.ndims; ++i) s += fmt::format(",{}", d.padded_dims[i]);
  if (d.format_kind == dnnl_blocked) {
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    s += ":s";
    for (int i = 0; i < d.ndims; ++i) s += fmt::format(",{}", b.strides[i]);
    s += ":b";
    for (int i = 0; i < b.inner_nblks; ++i) s += fmt::format(",{}x{}", b.inner_idxs[i], b.inner_blks[i]);
  } else if (d.format_kind == dnnl_format_kind_wino) {
    // The Winograd kernel's blocking depends on the image size too, so
    // that two shapes of one node can want different weights.
    const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
    s += fmt::format(":w{},{},{},{},{},{},{},{},{},{},{}", static_cast<int>(w.wino_format), w.r, w.alpha,
                     w.ic, w.oc, w.ic_block, w.oc_block, w.ic2_block, w.oc2_block, w.adj_scale, w.size);
  }
  return s + fmt::format(":e{}", static_cast<unsigned>(d.extra.flags));
}

Expected<TensorKernel> MakeOneDnnConv(const Window3& g, const FusedEpilogue& epilogue, const float* w,
                                      const float* bias, bool has_residual, TensorLayout layout,
                                      bool blocked_internally, DType compute, bool src_row_major,
                                      const LaidOutSlot& slot, bool winograd) {
  using dnnl::memory;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  if (winograd && (layout != TensorLayout::kNCHW16c || !WinogradFusesActivation(epilogue))) {
    return Unsupported("oneDNN's Winograd convolution takes nchw16c activations and no activation but ReLU");
  }
  try {
    dnnl::engine& engine = Engine();
    auto conv = std::make_shared<OneDnnConv>();
    const bool bf16 = compute == DType::kBF16;
    ConvDescs d =
        DescribeConv(g, epilogue, has_residual, layout, blocked_internally, compute, src_row_major, winograd);
    conv->src = d.src;
    conv->dst = d.dst;
    conv->blocked = d.blocked;
    const memory::desc& b_desc = d.b_desc;
    const memory::dims& w_dims = d.w_dims;
    const bool grouped = d.grouped;
    dnnl::convolution_forward::primitive_desc& pd = d.pd;
    conv->primitive = dnnl::convolution_forward(pd);
    conv->weights_desc = pd.weights_desc();
    dnnl::stream stream(engine);
    // The weights in the format the primitive picked: an artifact's stored
    // copy, used where it is mapped (oneDNN only reads weights), or reordered here.
    const std::string layout_name = OneDnnWeightsLayoutName(pd.weights_desc());
    const uint8_t* stored =
        slot.store != nullptr ? slot.store->Take(slot.node, layout_name, pd.weights_desc().get_size()) : nullptr;
    if (stored != nullptr) {
      conv->weights = memory(pd.weights_desc(), engine, const_cast<uint8_t*>(stored));
    } else {
      conv->weights = memory(pd.weights_desc(), engine);
      memory user_w(memory::desc(w_dims, dt::f32, grouped ? tag::goihw : tag::oihw), engine,
                    const_cast<float*>(w));
      dnnl::reorder(user_w, conv->weights).execute(stream, user_w, conv->weights);
    }
    conv->bias = memory(b_desc, engine);
    auto* b = static_cast<float*>(conv->bias.get_data_handle());
    for (int64_t m = 0; m < g.out_channels; ++m) b[m] = bias != nullptr ? bias[m] : 0.0f;
    stream.wait();
    conv->dst_bytes = conv->dst.get_size();
    conv->has_residual = has_residual;
    conv->residual_added_after = d.residual_added_after;
    TensorKernel k;
    if (conv->blocked) {
      conv->conv_src = pd.src_desc();
      conv->conv_dst = pd.dst_desc();
      if (conv->conv_src != conv->src) {
        conv->src_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, conv->src, engine, conv->conv_src));
        conv->src_scratch = Round64(conv->conv_src.get_size());
      }
      if (conv->conv_dst != conv->dst) {
        conv->dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(engine, conv->conv_dst, engine, conv->dst));
        if (has_residual) {
          conv->residual_in =
              dnnl::reorder(dnnl::reorder::primitive_desc(engine, conv->dst, engine, conv->conv_dst));
        }
        conv->dst_scratch = Round64(conv->conv_dst.get_size());
      }
      k.scratch_bytes = conv->src_scratch + conv->dst_scratch;
    }
    k.impl = std::string("onednn:") + pd.impl_info_str() + (bf16 ? "-bf16" : conv->blocked ? "-blocked" : "");
    k.run = [conv](const TensorCall& call) -> Status {
      try {
        dnnl::engine& eng = Engine();
        SetOneDnnThreads(call.pool != nullptr ? call.pool->num_threads() : 1);
        auto* y = static_cast<float*>(call.outputs[0]);
        dnnl::stream stream(eng);
        if (conv->blocked) {
          auto* scratch = static_cast<uint8_t*>(call.scratch);
          memory user_src(conv->src, eng, const_cast<void*>(call.inputs[0]));
          memory user_dst(conv->dst, eng, y);
          memory src = user_src, dst = user_dst;
          if (conv->src_scratch != 0) {
            src = memory(conv->conv_src, eng, scratch);
            conv->src_in.execute(stream, user_src, src);
          }
          if (conv->dst_scratch != 0) dst = memory(conv->conv_dst, eng, scratch + conv->src_scratch);
          if (conv->has_residual) {
            memory residual(conv->dst, eng, const_cast<void*>(call.inputs[3]));
            if (conv->dst_scratch != 0) {
              conv->residual_in.execute(stream, residual, dst);
            } else if (!conv->residual_added_after && call.inputs[3] != y) {
              std::memcpy(y, call.inputs[3], conv->dst_bytes);
            }
          }
          conv->primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                           {DNNL_ARG_WEIGHTS, conv->weights},
                                           {DNNL_ARG_BIAS, conv->bias},
                                           {DNNL_ARG_DST, dst}});
          if (conv->dst_scratch != 0) conv->dst_out.execute(stream, dst, user_dst);
          stream.wait();
          if (conv->residual_added_after) AddResidualAfter(*conv, call, y);
          return Status::Ok();
        }
        if (conv->has_residual && !conv->residual_added_after && call.inputs[3] != y) {
          std::memcpy(y, call.inputs[3], conv->dst_bytes);
        }
        memory src(conv->src, eng, const_cast<void*>(call.inputs[0]));
        memory dst(conv->dst, eng, y);
        conv->primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, conv->weights},
                                         {DNNL_ARG_BIAS, conv->bias},
                                         {DNNL_ARG_DST, dst}});
        stream.wait();
        if (conv->residual_added_after) AddResidualAfter(*conv, call, y);
        return Status::Ok();
      } catch (const dnnl::error& e) {
        return Internal("oneDNN convolution failed: {}", e.what());
      }
    };
    // Recorded once the kernel is made: its weights live as long as it does.
    if (stored == nullptr && slot.store != nullptr) {
      slot.store->Record(slot.node, layout_name,
                         {static_cast<const uint8_t*>(conv->weights.get_data_handle()), pd.weights_desc().get_size()});
    }
    return k;
  } catch (const dnnl::error& e) {
    return Unsupported("oneDNN does not take this convolution: {}", e.what());
  }
}

}  // namespace kiln::cpu
