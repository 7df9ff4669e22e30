// Pooling kernels (see pooling.h). Each output plane is independent, so
// planes (n, c) go to the pool's threads; the windows are clipped to the
// input once per output row rather than tested per tap.
#include "backend/cpu/tensor_kernels/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

// Taps of one axis for output o: the first input index, and how many taps
// fall inside the input [lo, hi) and inside the padded input (for
// count_include_pad, the window clipped at the padded input's end).
struct AxisTaps {
  int64_t start, first_tap, end_tap, padded_taps;
};

AxisTaps TapsOf(const Window3& g, int axis, int64_t o) {
  const int64_t start = o * g.stride[axis] - g.pad_begin[axis];
  const int64_t d = g.dilation[axis], k = g.kernel[axis];
  AxisTaps t{start, 0, k, 0};
  while (t.first_tap < k && start + t.first_tap * d < 0) ++t.first_tap;
  while (t.end_tap > t.first_tap && start + (t.end_tap - 1) * d >= g.in[axis]) --t.end_tap;
  const int64_t padded_end = g.in[axis] + g.pad_end[axis];
  int64_t in_padded = 0;
  for (int64_t i = 0; i < k; ++i) in_padded += start + i * d < padded_end ? 1 : 0;
  t.padded_taps = in_padded;
  return t;
}

// T: float for every pool; uint8_t / int8_t for MaxPool.
struct PoolParams {
  Window3 g;
  PoolKind kind = PoolKind::kMax;
  bool count_include_pad = false;
  bool column_major_indices = false;  // storage_order 1
  double p = 2.0;                     // LpPool's norm
  // Per axis and output index, the window's taps (computed once).
  std::array<std::vector<AxisTaps>, 3> taps;
};

PoolParams WithTapTables(PoolParams p) {
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t o = 0; o < p.g.out[axis]; ++o) p.taps[axis].push_back(TapsOf(p.g, axis, o));
  }
  return p;
}

template <typename T>
void PoolPlanes(const PoolParams& p, const T* x, T* y, int64_t* indices, int64_t begin, int64_t end) {
  const Window3& g = p.g;
  const int64_t in_pixels = g.InPixels(), out_pixels = g.OutPixels();
  for (int64_t plane = begin; plane < end; ++plane) {
    const T* xp = x + plane * in_pixels;
    int64_t yi = plane * out_pixels;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const AxisTaps& td = p.taps[0][od];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const AxisTaps& th = p.taps[1][oh];
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++yi) {
          const AxisTaps& tw = p.taps[2][ow];
          T best = std::numeric_limits<T>::lowest();
          int64_t best_at = -1;
          double sum = 0.0;
          int64_t count = 0;
          for (int64_t a = td.first_tap; a < td.end_tap; ++a) {
            const int64_t id = td.start + a * g.dilation[0];
            for (int64_t b = th.first_tap; b < th.end_tap; ++b) {
              const int64_t ih = th.start + b * g.dilation[1];
              const T* row = xp + (id * g.in[1] + ih) * g.in[2];
              for (int64_t c = tw.first_tap; c < tw.end_tap; ++c) {
                const int64_t iw = tw.start + c * g.dilation[2];
                const T v = row[iw];
                if (p.kind == PoolKind::kMax) {
                  if (v > best || best_at < 0) {
                    best = v;
                    best_at = (id * g.in[1] + ih) * g.in[2] + iw;
                    if (p.column_major_indices) best_at = (iw * g.in[1] + ih) * g.in[0] + id;
                  }
                } else if (p.kind == PoolKind::kAverage) {
                  sum += v;
                } else {
                  sum += std::pow(std::fabs(static_cast<double>(v)), p.p);
                }
                ++count;
              }
            }
          }
          if (p.kind == PoolKind::kMax) {
            // A window with no tap inside the input (dilated past it) is -inf.
            y[yi] = best_at < 0 && std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                        : best;
            if (indices != nullptr) indices[yi] = plane * in_pixels + std::max<int64_t>(best_at, 0);
          } else if (p.kind == PoolKind::kAverage) {
            const int64_t divisor =
                p.count_include_pad ? td.padded_taps * th.padded_taps * tw.padded_taps : count;
            y[yi] = divisor > 0 ? static_cast<T>(sum / static_cast<double>(divisor)) : T{};
          } else {
            y[yi] = static_cast<T>(std::pow(sum, 1.0 / p.p));
          }
        }
      }
    }
  }
}

Status CheckF32(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype != DType::kF32) {
    return Unsupported("{} {}: dtype {} not supported (f32 only)", args.op_type, args.node,
                       DTypeName(args.inputs[0].dtype));
  }
  return Status::Ok();
}

// Max (without indices) and average a row of outputs at a time: for each
// tap, one pass over the outputs whose tap is inside the row (ranges from
// the tables), which the compiler vectorizes; no branch per element.
// kStride: the column stride when known at compile time (0: at run time),
// so that stride-2 windows (every stem's MaxPool) vectorize too.
template <typename T, int kStride = 0>
void PoolPlanesByRows(const PoolParams& p, const T* x, T* y, int64_t begin, int64_t end) {
  const Window3& g = p.g;
  const int64_t in_pixels = g.InPixels(), OW = g.out[2], W = g.in[2];
  const int64_t sw = kStride != 0 ? kStride : g.stride[2];
  const bool is_max = p.kind == PoolKind::kMax;
  using Acc = std::conditional_t<std::is_same_v<T, float>, float, T>;
  std::vector<Acc> acc(static_cast<size_t>(OW)), rows_max(static_cast<size_t>(is_max ? W : 0));
  // Per kw tap: the column offset and the outputs [lo, hi) it reads inside the row.
  std::vector<int64_t> offset(static_cast<size_t>(g.kernel[2])), lo(offset.size()), hi(offset.size());
  for (int64_t kj = 0; kj < g.kernel[2]; ++kj) {
    const int64_t off = kj * g.dilation[2] - g.pad_begin[2];
    offset[static_cast<size_t>(kj)] = off;
    lo[static_cast<size_t>(kj)] = std::min(OW, off >= 0 ? 0 : (-off + sw - 1) / sw);
    hi[static_cast<size_t>(kj)] = std::clamp<int64_t>(W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1, 0, OW);
  }
  for (int64_t plane = begin; plane < end; ++plane) {
    const T* xp = x + plane * in_pixels;
    T* yp = y + plane * g.OutPixels();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const AxisTaps& td = p.taps[0][static_cast<size_t>(od)];
      for (int64_t oh = 0; oh < g.out[1]; ++oh, yp += OW) {
        const AxisTaps& th = p.taps[1][static_cast<size_t>(oh)];
        std::fill(acc.begin(), acc.end(), is_max ? std::numeric_limits<Acc>::lowest() : Acc{});
        if (is_max) {
          // The window's rows' maximum first (contiguous, one pass per row),
          // then one pass per column tap over it: kh + kw passes, not kh x kw.
          std::fill(rows_max.begin(), rows_max.end(), std::numeric_limits<Acc>::lowest());
          for (int64_t a = td.first_tap; a < td.end_tap; ++a) {
            const int64_t id = td.start + a * g.dilation[0];
            for (int64_t b = th.first_tap; b < th.end_tap; ++b) {
              const T* row = xp + (id * g.in[1] + th.start + b * g.dilation[1]) * W;
              for (int64_t i = 0; i < W; ++i)
                rows_max[static_cast<size_t>(i)] = std::max(rows_max[static_cast<size_t>(i)], row[i]);
            }
          }
          for (size_t kj = 0; kj < offset.size(); ++kj) {
            const Acc* src = rows_max.data() + offset[kj];
            for (int64_t ow = lo[kj]; ow < hi[kj]; ++ow)
              acc[static_cast<size_t>(ow)] = std::max(acc[static_cast<size_t>(ow)], src[ow * sw]);
          }
        }
        for (int64_t a = td.first_tap; a < td.end_tap && !is_max; ++a) {
          const int64_t id = td.start + a * g.dilation[0];
          for (int64_t b = th.first_tap; b < th.end_tap; ++b) {
            const T* row = xp + (id * g.in[1] + th.start + b * g.dilation[1]) * W;
            for (size_t kj = 0; kj < offset.size(); ++kj) {
              const T* src = row + offset[kj];
              if (is_max) {
                for (int64_t ow = lo[kj]; ow < hi[kj]; ++ow)
                  acc[static_cast<size_t>(ow)] = std::max(acc[static_cast<size_t>(ow)], src[ow * sw]);
              } else {
                for (int64_t ow = lo[kj]; ow < hi[kj]; ++ow) acc[static_cast<size_t>(ow)] += src[ow * sw];
              }
            }
          }
        }
        const int64_t rows_taps = (td.end_tap - td.first_tap) * (th.end_tap - th.first_tap);
        const int64_t rows_padded = td.padded_taps * th.padded_taps;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const AxisTaps& tw = p.taps[2][static_cast<size_t>(ow)];
          if (is_max) {
            yp[ow] = acc[static_cast<size_t>(ow)];
          } else {
            const int64_t divisor =
                p.count_include_pad ? rows_padded * tw.padded_taps : rows_taps * (tw.end_tap - tw.first_tap);
            yp[ow] =
                divisor > 0 ? static_cast<T>(acc[static_cast<size_t>(ow)] / static_cast<Acc>(divisor)) : T{};
          }
        }
      }
    }
  }
}

template <typename T>
TensorKernel PoolKernel(const PoolParams& p, bool with_indices) {
  TensorKernel k;
  k.impl = "kiln";
  k.run = [p, with_indices](const TensorCall& call) {
    const auto* x = static_cast<const T*>(call.inputs[0]);
    auto* y = static_cast<T*>(call.outputs[0]);
    auto* indices = with_indices ? static_cast<int64_t*>(call.outputs[1]) : nullptr;
    const int64_t planes = p.g.batch * p.g.in_channels;
    const bool by_rows = indices == nullptr && p.kind != PoolKind::kLp;
    auto body = [&](int64_t b, int64_t e, int) {
      if (by_rows && p.g.stride[2] == 1) {
        PoolPlanesByRows<T, 1>(p, x, y, b, e);
      } else if (by_rows && p.g.stride[2] == 2) {
        PoolPlanesByRows<T, 2>(p, x, y, b, e);
      } else if (by_rows) {
        PoolPlanesByRows<T>(p, x, y, b, e);
      } else {
        PoolPlanes<T>(p, x, y, indices, b, e);
      }
    };
    if (call.pool == nullptr) {
      body(0, planes, 0);
    } else {
      call.pool->ParallelFor(planes, 1, body);
    }
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakePool(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedPool(args);
  const DType dtype = args.inputs[0].dtype;
  const bool max_of_bytes = args.op_type == "MaxPool" && (dtype == DType::kU8 || dtype == DType::kI8);
  if (!max_of_bytes) KILN_RETURN_IF_ERROR(CheckF32(args));
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry,
                        PoolGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims));
  if (geometry.spatial > 3) {
    return Unsupported("{} {}: {} spatial axes (1 to 3 supported)", args.op_type, args.node,
                       geometry.spatial);
  }
  PoolParams p;
  p.g = ToWindow3(geometry);
  p.kind = args.op_type == "MaxPool"       ? PoolKind::kMax
           : args.op_type == "AveragePool" ? PoolKind::kAverage
                                           : PoolKind::kLp;
  p.count_include_pad = IntAttrOr(args.a(), "count_include_pad", 0) != 0;
  p.column_major_indices = IntAttrOr(args.a(), "storage_order", 0) == 1;
  p.p = static_cast<double>(IntAttrOr(args.a(), "p", 2));
  p = WithTapTables(std::move(p));
  const bool with_indices = args.outputs.size() > 1;
  if (dtype == DType::kU8) return PoolKernel<uint8_t>(p, with_indices);
  if (dtype == DType::kI8) return PoolKernel<int8_t>(p, with_indices);
  return PoolKernel<float>(p, with_indices);
}

Expected<TensorKernel> MakeGlobalPool(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedGlobalPool(args);
  KILN_RETURN_IF_ERROR(CheckF32(args));
  const auto& dims = args.inputs[0].dims;
  const int64_t planes = dims[0] * dims[1];
  const int64_t pixels = args.inputs[0].ElementCount() / std::max<int64_t>(planes, 1);
  const PoolKind kind = args.op_type == "GlobalMaxPool"       ? PoolKind::kMax
                        : args.op_type == "GlobalAveragePool" ? PoolKind::kAverage
                                                              : PoolKind::kLp;
  const double p = static_cast<double>(IntAttrOr(args.a(), "p", 2));
  TensorKernel k;
  k.impl = "kiln";
  k.run = [=](const TensorCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    auto body = [&](int64_t b, int64_t e, int) {
      for (int64_t plane = b; plane < e; ++plane) {
        const float* xp = x + plane * pixels;
        if (kind == PoolKind::kMax) {
          float best = xp[0];
          for (int64_t i = 1; i < pixels; ++i) best = std::max(best, xp[i]);
          y[plane] = best;
        } else if (kind == PoolKind::kAverage) {
          // Eight partial sums: vectorizes, and keeps rounding error low on large planes.
          float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t i = 0;
          for (; i + 8 <= pixels; i += 8) {
            for (int j = 0; j < 8; ++j) part[j] += xp[i + j];
          }
          double sum = 0.0;
          for (int j = 0; j < 8; ++j) sum += part[j];
          for (; i < pixels; ++i) sum += xp[i];
          y[plane] = static_cast<float>(sum / static_cast<double>(pixels));
        } else {
          double sum = 0.0;
          for (int64_t i = 0; i < pixels; ++i) sum += std::pow(std::fabs(static_cast<double>(xp[i])), p);
          y[plane] = static_cast<float>(std::pow(sum, 1.0 / p));
        }
      }
    };
    if (call.pool == nullptr) {
      body(0, planes, 0);
    } else {
      call.pool->ParallelFor(planes, 8, body);
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

BlockedPoolTaps PoolAxisTaps(const Window3& g, int axis, int64_t o) {
  const AxisTaps t = TapsOf(g, axis, o);
  return {t.start, t.first_tap, t.end_tap, t.padded_taps};
}

void AddPoolKernels(std::vector<TensorKernelEntry>* kernels) {
  const char* limits = "1-d to 3-d; f32; auto_pad NOTSET|SAME_UPPER|SAME_LOWER|VALID; ceil_mode; dilations";
  kernels->push_back({"MaxPool",
                      MakePool,
                      {DType::kF32, DType::kU8, DType::kI8},
                      std::string(limits) + "; Indices with storage_order 0|1; u8/i8 too",
                      PoolTakesLayout});
  kernels->push_back(
      {"AveragePool", MakePool, {DType::kF32}, std::string(limits) + "; count_include_pad", PoolTakesLayout});
  kernels->push_back({"LpPool", MakePool, {DType::kF32}, limits});
  kernels->push_back({"GlobalAveragePool", MakeGlobalPool, {DType::kF32}, "f32", GlobalPoolTakesLayout});
  kernels->push_back({"GlobalMaxPool", MakeGlobalPool, {DType::kF32}, "f32", GlobalPoolTakesLayout});
  kernels->push_back({"GlobalLpPool", MakeGlobalPool, {DType::kF32}, "f32"});
}

}  // namespace kiln::cpu
