// ConvTranspose through the convolution GEMM (see conv_transpose_plan.h).
#include "backend/cpu/tensor_kernels/conv_transpose_plan.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

// Adds the columns of output planes [begin, end) of image n into y.
void ScatterColumns(const ConvTransposePlan& p, const float* cols, float* yn, int64_t begin, int64_t end) {
  const Window3& g = p.g;
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2], taps = kh * kw, hw = H * W;
  const int64_t mg = g.GroupOut();
  for (int64_t m = begin; m < end; ++m) {
    float* ym = yn + m * OH * OW;
    std::fill(ym, ym + OH * OW, p.bias[static_cast<size_t>(m)]);
    const int64_t grp = m / mg, mo = m % mg;
    for (int64_t ki = 0; ki < kh; ++ki) {
      for (int64_t kj = 0; kj < kw; ++kj) {
        const float* src = cols + ((grp * mg + mo) * taps + ki * kw + kj) * hw;
        // Input columns iw whose output column iw * s - pad + kj * d is inside.
        const int64_t offset = kj * g.dilation[2] - g.pad_begin[2], s = g.stride[2];
        const int64_t iw_lo = offset >= 0 ? 0 : (-offset + s - 1) / s;
        const int64_t iw_hi = std::min<int64_t>(W, OW - 1 - offset < 0 ? 0 : (OW - 1 - offset) / s + 1);
        for (int64_t ih = 0; ih < H; ++ih) {
          const int64_t oh = ih * g.stride[1] - g.pad_begin[1] + ki * g.dilation[1];
          if (oh < 0 || oh >= OH) continue;
          const float* srow = src + ih * W;
          float* yrow = ym + oh * OW + offset;
          if (s == 1) {
            for (int64_t iw = iw_lo; iw < iw_hi; ++iw) yrow[iw] += srow[iw];
          } else {
            for (int64_t iw = iw_lo; iw < iw_hi; ++iw) yrow[iw * s] += srow[iw];
          }
        }
      }
    }
  }
}

}  // namespace

bool ConvTransposePlanApplies(const Window3& g, Isa isa) {
  return (isa == Isa::kAvx2 || isa == Isa::kAvx512) && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1;
}

ConvTransposePlan MakeConvTransposePlan(const Window3& g, const float* w, const float* bias, Isa isa,
                                        int threads, const LaidOutSlot& slot) {
  ConvTransposePlan p;
  p.g = g;
  p.bias.assign(static_cast<size_t>(g.out_channels), 0.0f);
  if (bias != nullptr) std::copy(bias, bias + g.out_channels, p.bias.begin());
  const int64_t taps = g.kernel[1] * g.kernel[2], cg = g.GroupIn(), mg = g.GroupOut();
  // The columns' convolution: 1x1 over the input pixels, one output
  // channel per (group, output channel, tap).
  Window3 cols;
  cols.batch = 1;
  cols.in_channels = g.in_channels;
  cols.out_channels = g.group * mg * taps;
  cols.group = g.group;
  cols.in = {1, g.in[1], g.in[2]};
  cols.out = cols.in;
  // Its weight [group * mg * taps, cg]: row (grp, mo, tap), column c is w[grp * cg + c][mo][tap].
  std::vector<float> wt(static_cast<size_t>(cols.out_channels * cg));
  for (int64_t grp = 0; grp < g.group; ++grp) {
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t mo = 0; mo < mg; ++mo) {
        for (int64_t tap = 0; tap < taps; ++tap) {
          wt[static_cast<size_t>(((grp * mg + mo) * taps + tap) * cg + c)] =
              w[((grp * cg + c) * mg + mo) * taps + tap];
        }
      }
    }
  }
  p.gemm = MakeConvPlan(cols, FusedEpilogue{}, wt.data(), nullptr, isa, threads, slot);
  p.cols_floats = cols.out_channels * g.in[1] * g.in[2];
  return p;
}

void RunConvTransposePlan(const ConvTransposePlan& p, const float* x, float* y, float* scratch,
                          ThreadPool* pool) {
  const Window3& g = p.g;
  float* cols = scratch;
  for (int64_t n = 0; n < g.batch; ++n) {
    RunConvPlan(p.gemm, x + n * g.in_channels * g.InPixels(), nullptr, cols, scratch + p.cols_floats, pool);
    float* yn = y + n * g.out_channels * g.OutPixels();
    if (pool != nullptr) {
      pool->ParallelFor(g.out_channels, 1,
                        [&](int64_t b, int64_t e, int) { ScatterColumns(p, cols, yn, b, e); });
    } else {
      ScatterColumns(p, cols, yn, 0, g.out_channels);
    }
  }
}

}  // namespace kiln::cpu
