// The normalizations (f32; f16 through f32): LayerNormalization through the
// vector table, BatchNormalization in inference form as a per-channel
// scale and shift, Instance/Group normalization, LpNormalization and
// MeanVarianceNormalization. Statistics are two-pass and kept in double
// where the reference loops compute them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/tensor_kernels/broadcast_loop.h"
#include "backend/cpu/tensor_kernels/reduce_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace {

Status RequireF32(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype != DType::kF32) return UnsupportedDType(args, args.inputs[0].dtype, "f32 and f16");
  return Status::Ok();
}

size_t Align64(size_t n) {
  return (n + 63) / 64 * 64;
}

// Copies src (of dims `from`) broadcast to `to` into dst.
void ExpandTo(const BroadcastPlan& plan, const float* src, float* dst) {
  BroadcastBinary(nullptr, plan, src, src, dst, [](float a, float) { return a; });
}

Expected<TensorKernel> MakeLayerNormF32(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(RequireF32(args));
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = IntAttrOr(args, "axis", -1);
  if (axis < 0) axis += rank;
  const AxisView v = ViewAround(dims, axis, rank);
  const int64_t rows = v.outer, cols = v.axis;
  const float epsilon = FloatAttrOr(args, "epsilon", 1e-5f);
  const std::vector<int64_t> norm_dims(dims.begin() + axis, dims.end());
  // Scale and bias broadcast to the normalized dims, expanded per call when
  // they are not already whole.
  const bool has_bias = args.has(2);
  const bool expand_scale = args.inputs[1].ElementCount() != cols;
  const bool expand_bias = has_bias && args.inputs[2].ElementCount() != cols;
  const BroadcastPlan scale_plan = MakeBroadcastPlan(norm_dims, {args.inputs[1].dims, args.inputs[1].dims});
  const BroadcastPlan bias_plan =
      has_bias ? MakeBroadcastPlan(norm_dims, {args.inputs[2].dims, args.inputs[2].dims}) : BroadcastPlan{};
  const bool want_mean = args.outputs.size() > 1;
  const bool want_inv = args.outputs.size() > 2;
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(TensorVec().isa);
  k.scratch_bytes = 2 * Align64(static_cast<size_t>(cols) * sizeof(float));
  k.run = [=](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    const float* scale = static_cast<const float*>(call.inputs[1]);
    const float* bias = has_bias ? static_cast<const float*>(call.inputs[2]) : nullptr;
    float* y = static_cast<float*>(call.outputs[0]);
    float* mean = want_mean ? static_cast<float*>(call.outputs[1]) : nullptr;
    float* inv = want_inv ? static_cast<float*>(call.outputs[2]) : nullptr;
    float* scale_buf = reinterpret_cast<float*>(call.scratch);
    float* bias_buf =
        reinterpret_cast<float*>(call.scratch + Align64(static_cast<size_t>(cols) * sizeof(float)));
    if (expand_scale) {
      ExpandTo(scale_plan, scale, scale_buf);
      scale = scale_buf;
    }
    if (expand_bias) {
      ExpandTo(bias_plan, bias, bias_buf);
      bias = bias_buf;
    }
    const TensorVecTable& vec = TensorVec();
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1));
    SplitRanges(call.pool, rows, grain, [&](int64_t b, int64_t e) {
      vec.layer_norm_rows(x + b * cols, scale, bias, y + b * cols, e - b, cols, epsilon,
                          mean != nullptr ? mean + b : nullptr, inv != nullptr ? inv + b : nullptr);
    });
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeBatchNormF32(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(RequireF32(args));
  const auto& dims = args.inputs[0].dims;
  const AxisView v = ViewAround(dims, 1, std::min<int64_t>(2, static_cast<int64_t>(dims.size())));
  const float epsilon = FloatAttrOr(args, "epsilon", 1e-5f);
  TensorKernel k;
  k.impl = "reference";
  k.scratch_bytes = 2 * Align64(static_cast<size_t>(v.axis) * sizeof(float));
  k.run = [v, epsilon](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    const float* scale = static_cast<const float*>(call.inputs[1]);
    const float* bias = static_cast<const float*>(call.inputs[2]);
    const float* mean = static_cast<const float*>(call.inputs[3]);
    const float* var = static_cast<const float*>(call.inputs[4]);
    float* y = static_cast<float*>(call.outputs[0]);
    float* mul = reinterpret_cast<float*>(call.scratch);
    float* add =
        reinterpret_cast<float*>(call.scratch + Align64(static_cast<size_t>(v.axis) * sizeof(float)));
    for (int64_t c = 0; c < v.axis; ++c) {
      mul[c] = static_cast<float>(scale[c] / std::sqrt(static_cast<double>(var[c]) + epsilon));
      add[c] = bias[c] - mean[c] * mul[c];
    }
    const int64_t planes = v.outer * v.axis;
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(v.inner, 1));
    SplitRanges(call.pool, planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t c = p % v.axis;
        const float m = mul[c], a = add[c];
        const float* xp = x + p * v.inner;
        float* yp = y + p * v.inner;
        for (int64_t i = 0; i < v.inner; ++i) yp[i] = xp[i] * m + a;
      }
    });
    return Status::Ok();
  };
  return k;
}

// Mean and 1/sqrt(var + eps) of n floats, two passes in double.
void Moments(const float* x, int64_t n, double epsilon, double* mean, double* inv_std) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double m = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - m) * (x[i] - m);
  *mean = m;
  *inv_std = 1.0 / std::sqrt((n > 0 ? sq / static_cast<double>(n) : 0.0) + epsilon);
}

// GroupNormalization with groups = channels is InstanceNormalization.
// Scale and bias each hold one value per channel or per group.
Expected<TensorKernel> GroupNormKernel(const TensorKernelArgs& args, int64_t groups, bool scale_per_channel,
                                       bool bias_per_channel) {
  KILN_RETURN_IF_ERROR(RequireF32(args));
  const auto& dims = args.inputs[0].dims;
  const AxisView v = ViewAround(dims, 1, 2);  // outer = N, axis = C, inner = spatial
  const int64_t per_group = v.axis / groups;
  const float epsilon = FloatAttrOr(args, "epsilon", 1e-5f);
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    const float* scale = static_cast<const float*>(call.inputs[1]);
    const float* bias = static_cast<const float*>(call.inputs[2]);
    float* y = static_cast<float*>(call.outputs[0]);
    const int64_t group_size = per_group * v.inner;
    SplitRanges(call.pool, v.outer * groups,
                   std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(group_size, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t ng = b; ng < e; ++ng) {
                       const int64_t g = ng % groups;
                       const float* xg = x + ng * group_size;
                       float* yg = y + ng * group_size;
                       double mean, inv_std;
                       Moments(xg, group_size, epsilon, &mean, &inv_std);
                       for (int64_t c = 0; c < per_group; ++c) {
                         const float sc = scale[scale_per_channel ? g * per_group + c : g];
                         const float bi = bias[bias_per_channel ? g * per_group + c : g];
                         const float mul = static_cast<float>(sc * inv_std);
                         const float add = static_cast<float>(bi - mean * sc * inv_std);
                         const float* xc = xg + c * v.inner;
                         float* yc = yg + c * v.inner;
                         for (int64_t i = 0; i < v.inner; ++i) yc[i] = xc[i] * mul + add;
                       }
                     }
                   });
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeInstanceNormF32(const TensorKernelArgs& args) {
  return GroupNormKernel(args, args.inputs[0].dims[1], true, true);
}

Expected<TensorKernel> MakeGroupNormF32(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(int64_t groups, args.a().Int("num_groups"));
  const int64_t c = args.inputs[0].dims[1];
  return GroupNormKernel(args, groups, args.inputs[1].ElementCount() == c,
                         args.inputs[2].ElementCount() == c);
}

Expected<TensorKernel> MakeLpNormF32(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(RequireF32(args));
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = IntAttrOr(args, "axis", -1);
  if (axis < 0) axis += rank;
  const AxisView v = ViewAround(dims, axis, axis + 1);
  const bool l1 = IntAttrOr(args, "p", 2) == 1;
  TensorKernel k;
  k.impl = "reference";
  k.run = [v, l1](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    float* y = static_cast<float*>(call.outputs[0]);
    for (int64_t o = 0; o < v.outer; ++o) {
      for (int64_t j = 0; j < v.inner; ++j) {
        const int64_t base = o * v.axis * v.inner + j;
        double norm = 0.0;
        for (int64_t a = 0; a < v.axis; ++a) {
          const double e = x[base + a * v.inner];
          norm += l1 ? std::abs(e) : e * e;
        }
        if (!l1) norm = std::sqrt(norm);
        for (int64_t a = 0; a < v.axis; ++a)
          y[base + a * v.inner] = static_cast<float>(x[base + a * v.inner] / norm);
      }
    }
    return Status::Ok();
  };
  return k;
}

// (x - mean) / (sqrt(var) + 1e-9) with the statistics over `axes`, as the
// ONNX function body defines it (variance as E[x^2] - E[x]^2).
Expected<TensorKernel> MakeMvnF32(const TensorKernelArgs& args) {
  KILN_RETURN_IF_ERROR(RequireF32(args));
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> axes = {0, 2, 3};
  if (args.a().Has("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, args.a().Ints("axes"));
  }
  std::vector<int64_t> stat_dims = dims;
  for (int64_t a : axes) stat_dims[a < 0 ? a + rank : a] = 1;
  const BroadcastPlan plan = MakeBroadcastPlan(dims, {stat_dims});
  int64_t stat_n = 1;
  for (int64_t d : stat_dims) stat_n *= d;
  const int64_t n = args.inputs[0].ElementCount();
  const double count = stat_n > 0 ? static_cast<double>(n) / static_cast<double>(stat_n) : 1.0;
  TensorKernel k;
  k.impl = "reference";
  k.scratch_bytes = static_cast<size_t>(stat_n) * 2 * sizeof(double);
  k.run = [plan, stat_n, count](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    float* y = static_cast<float*>(call.outputs[0]);
    double* sum = reinterpret_cast<double*>(call.scratch);
    double* sq = sum + stat_n;
    std::fill(sum, sum + 2 * stat_n, 0.0);
    auto walk = [&](auto f) {
      BroadcastCursor cursor(plan, 0);
      for (int64_t r = 0; r < plan.rows; ++r, cursor.Next()) {
        for (int64_t i = 0; i < plan.inner; ++i) f(r * plan.inner + i, cursor.offset(0) + i * plan.step[0]);
      }
    };
    walk([&](int64_t e, int64_t s) {
      sum[s] += x[e];
      sq[s] += static_cast<double>(x[e]) * x[e];
    });
    for (int64_t s = 0; s < stat_n; ++s) {
      const double mean = sum[s] / count;
      const double var = std::max(0.0, sq[s] / count - mean * mean);
      sum[s] = mean;
      sq[s] = 1.0 / (std::sqrt(var) + 1e-9);
    }
    walk([&](int64_t e, int64_t s) { y[e] = static_cast<float>((x[e] - sum[s]) * sq[s]); });
    return Status::Ok();
  };
  return k;
}

}  // namespace

Expected<TensorKernel> MakeLayerNormKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeLayerNormF32);
}
Expected<TensorKernel> MakeBatchNormKernel(const TensorKernelArgs& args) {
  if (args.outputs.size() > 1 || IntAttrOr(args, "training_mode", 0) != 0) {
    return Unsupported("{} {}: training mode is not supported (inference form only)", args.op_type,
                       args.node);
  }
  return MakeViaF32(args, MakeBatchNormF32);
}
Expected<TensorKernel> MakeInstanceNormKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeInstanceNormF32);
}
Expected<TensorKernel> MakeGroupNormKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeGroupNormF32);
}
Expected<TensorKernel> MakeLpNormKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeLpNormF32);
}
Expected<TensorKernel> MakeMvnKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeMvnF32);
}

}  // namespace kiln::cpu
