// Resize and Upsample on the CPU. Nearest copies through per-axis index
// tables (any dtype; a repeated source row, as in a 2x upsample, is one
// memcpy of the row before). Linear and cubic are separable: one pass per
// resized axis, each output element a weighted sum of 2 or 4 taps along
// that axis, which equals ONNX's N-linear / N-cubic formula up to rounding.
// tf_crop_and_resize's out-of-range points get extrapolation_value.
// f16/bf16 interpolate in f32 (converted in scratch), as they are stored
// only. Nearest resizing of the image axes also runs on nchw16c activations.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/resize_taps.h"
#include "backend/cpu/tensor_kernels/shape_kernel_groups.h"
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"
#include "backend/cpu/tensor_kernels/tensor_scalar.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference
namespace {

struct ResizePlan {
  ResizeParams p;
  std::vector<AxisTaps> taps;                // per axis
  std::vector<size_t> passes;                // resized axes, in pass order (linear/cubic)
  std::vector<std::vector<int64_t>> tables;  // nearest: source offsets per axis
  bool extrapolates = false;
  size_t scratch_elems = 0;  // one intermediate buffer
};

Expected<ResizePlan> PlanResize(const OpParamSource& src, const TensorType& out) {
  ResizePlan plan;
  KILN_ASSIGN_OR_RETURN(plan.p, ResolveResize(src));
  if (plan.p.out_dims != out.dims) {
    return src.Error(fmt::format("the output [{}] differs from the shape [{}] fixed at compile time",
                                 DimsToString(plan.p.out_dims), DimsToString(out.dims)));
  }
  const size_t rank = plan.p.in_dims.size();
  for (size_t a = 0; a < rank; ++a) {
    if (plan.p.in_dims[a] == 0 && plan.p.out_dims[a] > 0)
      return src.Error(fmt::format("axis {} is empty", a));
    plan.taps.push_back(MakeAxisTaps(plan.p, a));
    plan.extrapolates = plan.extrapolates || plan.taps.back().any_outside;
  }
  if (plan.p.mode == ResizeMode::kNearest) {
    const std::vector<int64_t> strides = ContiguousStrides(plan.p.in_dims);
    for (size_t a = 0; a < rank; ++a) {
      std::vector<int64_t> t;
      for (int64_t i : plan.taps[a].index) t.push_back(i * strides[a]);
      plan.tables.push_back(std::move(t));
    }
    return plan;
  }
  // Innermost axes first; the intermediate shapes decide the scratch.
  std::vector<int64_t> cur = plan.p.in_dims;
  int64_t biggest = 0;
  for (size_t a = rank; a-- > 0;) {
    if (plan.taps[a].identity) continue;
    plan.passes.push_back(a);
    cur[a] = plan.p.out_dims[a];
    int64_t n = 1;
    for (int64_t d : cur) n *= d;
    biggest = std::max(biggest, n);
  }
  if (plan.passes.size() > 1) plan.scratch_elems = static_cast<size_t>(biggest);
  return plan;
}

// One separable pass along `axis`: [outer, in_len, inner] -> [outer, out_len, inner].
void ResamplePass(const float* src, float* dst, int64_t outer, int64_t in_len, int64_t inner,
                  const AxisTaps& taps, ThreadPool* pool) {
  const auto out_len = static_cast<int64_t>(taps.count());
  const int64_t per = taps.per_point;
  if (outer * out_len * inner == 0) return;
  auto body = [&](int64_t b, int64_t e) {
    int64_t o = b / out_len, j = b % out_len;  // advanced without dividing per row
    for (int64_t r = b; r < e; ++r) {
      float* d = dst + r * inner;
      const int64_t* idx = &taps.index[static_cast<size_t>(j * per)];
      const float* w = &taps.weight[static_cast<size_t>(j * per)];
      const float* base = src + o * in_len * inner;
      if (inner == 1) {
        float acc = 0;
        for (int64_t t = 0; t < per; ++t) acc += w[t] * base[idx[t]];
        d[0] = acc;
      } else {
        const float* s0 = base + idx[0] * inner;
        for (int64_t k = 0; k < inner; ++k) d[k] = w[0] * s0[k];
        for (int64_t t = 1; t < per; ++t) {
          const float* s = base + idx[t] * inner;
          const float wt = w[t];
          for (int64_t k = 0; k < inner; ++k) d[k] += wt * s[k];
        }
      }
      if (++j == out_len) {
        j = 0;
        ++o;
      }
    }
  };
  const int64_t rows = outer * out_len;
  if (pool == nullptr || pool->num_threads() <= 1 || rows * inner < (1 << 15)) {
    body(0, rows);
  } else {
    pool->ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)),
                      [&](int64_t b, int64_t e, int) { body(b, e); });
  }
}

// Sets the points that any axis marks outside the crop to `fill`.
void Extrapolate(const ResizePlan& plan, uint8_t* y, size_t elem, const uint8_t* fill) {
  const std::vector<int64_t>& dims = plan.p.out_dims;
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<int64_t> pos(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    bool outside = false;
    for (size_t a = 0; a < dims.size() && !outside; ++a) {
      outside = plan.taps[a].outside[static_cast<size_t>(pos[a])];
    }
    if (outside) std::memcpy(y + i * static_cast<int64_t>(elem), fill, elem);
    for (size_t a = dims.size(); a-- > 0;) {
      if (++pos[a] < dims[a]) break;
      pos[a] = 0;
    }
  }
}

bool IsHalf(DType t) {
  return t == DType::kF16 || t == DType::kBF16;
}

bool Interpolable(DType t) {
  return t == DType::kF32 || IsHalf(t);
}

int64_t ElementsOf(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void HalfToF32(DType t, const uint8_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = t == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
  }
}

void F32ToHalf(DType t, const float* src, int64_t n, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = t == DType::kF16 ? F32ToF16(src[i]) : F32ToBf16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

// Scratch of an interpolating plan: for f16/bf16 the input and output in
// f32, then two intermediates of `intermediate` floats each.
size_t InterpolationScratch(DType dtype, int64_t in_elems, int64_t out_elems, size_t intermediate) {
  const size_t half = IsHalf(dtype) ? static_cast<size_t>(in_elems + out_elems) : 0;
  return (half + 2 * intermediate) * sizeof(float);
}

Status RunResize(const ResizePlan& plan, const TensorCall& call, size_t elem, DType dtype) {
  const auto* x = static_cast<const uint8_t*>(call.inputs[0]);
  auto* y = static_cast<uint8_t*>(call.outputs[0]);
  int64_t out_elems = 1;
  for (int64_t d : plan.p.out_dims) out_elems *= d;
  if (out_elems == 0) return Status::Ok();
  if (plan.p.mode == ResizeMode::kNearest) {
    IndexTableCopy(elem, plan.tables, x, y, call.pool);
  } else if (plan.passes.empty()) {
    int64_t n = 1;
    for (int64_t d : plan.p.out_dims) n *= d;
    ParallelMemcpy(y, x, static_cast<size_t>(n) * elem, call.pool);
  } else {
    std::vector<int64_t> cur = plan.p.in_dims;
    auto* scratch = reinterpret_cast<float*>(call.scratch);
    const int64_t in_elems = ElementsOf(plan.p.in_dims);
    const float* src = reinterpret_cast<const float*>(x);
    float* y32 = reinterpret_cast<float*>(y);
    if (IsHalf(dtype)) {
      HalfToF32(dtype, x, in_elems, scratch);
      src = scratch;
      y32 = scratch + in_elems;
      scratch += in_elems + out_elems;
    }
    float* bufs[2] = {scratch, scratch + plan.scratch_elems};
    for (size_t i = 0; i < plan.passes.size(); ++i) {
      const size_t a = plan.passes[i];
      int64_t outer = 1, inner = 1;
      for (size_t b = 0; b < a; ++b) outer *= cur[b];
      for (size_t b = a + 1; b < cur.size(); ++b) inner *= cur[b];
      float* dst = i + 1 == plan.passes.size() ? y32 : bufs[i % 2];
      ResamplePass(src, dst, outer, cur[a], inner, plan.taps[a], call.pool);
      cur[a] = plan.p.out_dims[a];
      src = dst;
    }
    if (IsHalf(dtype)) F32ToHalf(dtype, y32, out_elems, y);
  }
  if (plan.extrapolates) {
    uint8_t fill[8] = {0};
    EncodeScalar(dtype, plan.p.extrapolation_value, fill);
    Extrapolate(plan, y, elem, fill);
  }
  return Status::Ok();
}

// Nearest on nchw16c activations: the same index tables over the blocked
// dims [N, C/16, H, W], each pixel's 16-channel vector one 64-byte element
// (the channels must not be resized).
Expected<std::shared_ptr<const ResizePlan>> BlockedNearestPlan(const TensorKernelArgs& args) {
  KernelParams params(args);
  if (args.inputs[0].dtype != DType::kF32 || args.inputs[0].rank() != 4 || !params.Known({1, 2, 3})) {
    return Unsupported("{} {}: nchw16c activations need an f32 rank-4 input and scales or sizes known now",
                       args.op_type, args.node);
  }
  KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(params.AtBind(), args.outputs[0]));
  if (plan.p.mode != ResizeMode::kNearest || plan.extrapolates || !plan.taps[1].identity) {
    return Unsupported("{} {}: nchw16c activations take nearest resizing of the image axes only",
                       args.op_type, args.node);
  }
  const std::vector<int64_t> d = plan.p.in_dims;
  const int64_t blocks = ChannelBlocks(d[1]);
  const int64_t strides[4] = {blocks * d[2] * d[3], d[2] * d[3], d[3], 1};
  plan.tables.assign(4, {});
  for (size_t a = 0; a < 4; ++a) {
    if (a == 1) {
      for (int64_t b = 0; b < blocks; ++b) plan.tables[a].push_back(b * strides[a]);
    } else {
      for (int64_t i : plan.taps[a].index) plan.tables[a].push_back(i * strides[a]);
    }
  }
  return std::make_shared<const ResizePlan>(std::move(plan));
}

bool ResizeTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  return layout == TensorLayout::kNCHW16c && BlockedNearestPlan(args).ok();
}

Expected<TensorKernel> MakeBlockedNearest(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ResizePlan> plan, BlockedNearestPlan(args));
  TensorKernel k;
  k.impl = "index-table-nchw16c";
  k.run = [plan](const TensorCall& call) {
    IndexTableCopy(kChannelBlock * sizeof(float), plan->tables, static_cast<const uint8_t*>(call.inputs[0]),
                   static_cast<uint8_t*>(call.outputs[0]), call.pool);
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeResize(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedNearest(args);
  const DType dtype = args.inputs[0].dtype;
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(dtype));
  auto params = std::make_shared<KernelParams>(args);
  const TensorType out = args.outputs[0];
  std::shared_ptr<const ResizePlan> fixed;
  ResizeMode mode = ResizeMode::kNearest;
  if (params->Known({1, 2, 3})) {
    KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(params->AtBind(), out));
    mode = plan.p.mode;
    fixed = std::make_shared<const ResizePlan>(std::move(plan));
  } else {
    const auto m = args.a().String("mode");
    if (m.ok() && *m != "nearest") mode = ResizeMode::kLinear;
  }
  if (mode != ResizeMode::kNearest && !Interpolable(dtype)) {
    return Unsupported("{} {}: dtype {} is not supported for linear/cubic modes (f32, f16, bf16)",
                       args.op_type, args.node, DTypeName(dtype));
  }
  // A plan made at run time may need up to two intermediates, each no
  // bigger than the product of the larger of each axis' input and output.
  const int64_t in_elems = args.inputs[0].ElementCount(), out_elems = out.ElementCount();
  size_t scratch = 0;
  if (fixed) {
    if (fixed->p.mode != ResizeMode::kNearest) {
      scratch = InterpolationScratch(dtype, in_elems, out_elems, fixed->scratch_elems);
    }
  } else {
    int64_t bound = 1;
    for (size_t a = 0; a < out.dims.size(); ++a) bound *= std::max(out.dims[a], args.inputs[0].dims[a]);
    scratch = InterpolationScratch(dtype, in_elems, out_elems, static_cast<size_t>(bound));
  }
  TensorKernel k;
  k.impl = mode == ResizeMode::kNearest ? "index-table" : "separable";
  k.scratch_bytes = scratch;
  k.run = [=](const TensorCall& call) -> Status {
    if (fixed) return RunResize(*fixed, call, elem, dtype);
    KILN_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(params->AtRun(call.inputs), out));
    if (plan.p.mode != ResizeMode::kNearest && !Interpolable(dtype)) {
      return Unsupported("{} {}: dtype {} is not supported for linear/cubic", params->op_type(),
                         params->node(), DTypeName(dtype));
    }
    return RunResize(plan, call, elem, dtype);
  };
  return k;
}

}  // namespace

void AddResizeKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::string limits =
      "nearest (any dtype) | linear | cubic (f32, f16, bf16); antialias=0; scales/sizes/roi known at compile "
      "time";
  kernels->push_back({"Resize", MakeResize, MovableDTypes(), limits, ResizeTakesLayout});
  kernels->push_back({"Upsample", MakeResize, MovableDTypes(),
                      "nearest (any dtype) | linear (f32, f16, bf16)", ResizeTakesLayout});
}

}  // namespace kiln::cpu::shape_kernels
