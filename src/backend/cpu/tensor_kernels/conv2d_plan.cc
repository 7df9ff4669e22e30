// Choosing and packing kiln's own 2-d convolution (see conv2d_plan.h).
#include "backend/cpu/tensor_kernels/conv2d_plan.h"

#include <algorithm>

namespace kiln::cpu {

bool ConvPlanApplies(const Window3& g, Isa isa) {
  return (isa == Isa::kAvx2 || isa == Isa::kAvx512) && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1;
}

ConvPlan MakeConvPlan(const Window3& g, const FusedEpilogue& epilogue, const float* w, const float* bias,
                      Isa isa, int threads) {
  ConvPlan p;
  p.g = g;
  p.epilogue = epilogue;
  p.isa = isa;
  p.bias.assign(static_cast<size_t>(g.out_channels), 0.0f);
  if (bias != nullptr) std::copy(bias, bias + g.out_channels, p.bias.begin());
  const int lanes = isa == Isa::kAvx512 ? 16 : 8;
  const int64_t taps = g.kernel[1] * g.kernel[2];
  const int64_t mg = g.GroupOut(), cg = g.GroupIn();
  p.k = cg * taps;
  if (cg == 1 && mg == 1) {
    p.path = ConvPath::kDepthwise;
    p.nr = lanes;
    p.packed_w.assign(w, w + g.out_channels * taps);
    // Padded rows x stride phases x (phase width + slack for whole-vector loads).
    const int64_t padded_w = g.in[2] + g.pad_begin[2] + g.pad_end[2];
    const int64_t padded_h = g.in[1] + g.pad_begin[1] + g.pad_end[1];
    const int64_t s = g.stride[2];
    const int64_t max_offset = ((g.kernel[2] - 1) * g.dilation[2]) / s;
    const int64_t rounded_out = (g.out[2] + 4 * lanes - 1) / (4 * lanes) * (4 * lanes);
    const int64_t phase_w = std::max((padded_w + s - 1) / s, max_offset + rounded_out) + lanes;
    p.nc = phase_w;  // the phase row's length
    p.scratch_floats_per_thread = padded_h * s * phase_w;
    return p;
  }
  p.path = ConvPath::kGemm;
  // Register tiles: AVX-512 8 channels x 3 vectors (24 of 32 registers
  // accumulate), AVX2 6 channels x 2 vectors (12 of 16).
  p.mr = isa == Isa::kAvx512 ? kAvx512Mr : 6;
  p.nr = isa == Isa::kAvx512 ? kAvx512Nv * 16 : 16;
  p.m_panels = (mg + p.mr - 1) / p.mr;
  // K in as few blocks as possible of at most 1024 (each block is one more
  // pass over the output tile), evenly split.
  const int64_t k_blocks = (p.k + 1023) / 1024;
  p.kc = (p.k + k_blocks - 1) / k_blocks;
  // A K block x pixel block of im2col (up to 1024 x 192 floats) stays in L2.
  const int64_t pixels = g.OutPixels();
  int64_t nc = std::max<int64_t>(p.nr, (192 / p.nr) * p.nr);
  if (pixels < nc) nc = (pixels + p.nr - 1) / p.nr * p.nr;
  p.nc = nc;
  const int64_t base_items = g.group * ((pixels + p.nc - 1) / p.nc);
  const int64_t t = std::max(1, threads);
  if (base_items < 4 * t) {
    p.m_blocks =
        std::min<int64_t>((4 * t + base_items - 1) / base_items, std::max<int64_t>(1, p.m_panels / 2));
  }
  p.panels_per_block = (p.m_panels + p.m_blocks - 1) / p.m_blocks;
  p.m_blocks = (p.m_panels + p.panels_per_block - 1) / p.panels_per_block;
  p.shared_im2col = p.m_blocks > 1;
  p.identity_im2col = g.kernel[1] == 1 && g.kernel[2] == 1 && g.stride[1] == 1 && g.stride[2] == 1 &&
                      g.pad_begin[1] == 0 && g.pad_begin[2] == 0 && g.pad_end[1] == 0 && g.pad_end[2] == 0;
  if (p.shared_im2col) {
    // The panels of every group.
    p.scratch_floats_shared = g.group * p.k * ((pixels + p.nr - 1) / p.nr) * p.nr;
  } else {
    // A block's panels.
    p.scratch_floats_per_thread = p.kc * p.nc;
  }
  // Weights: [group][panel][k][mr], zero rows past the group's channels.
  p.packed_w.assign(static_cast<size_t>(g.group * p.m_panels * p.k * p.mr), 0.0f);
  for (int64_t grp = 0; grp < g.group; ++grp) {
    for (int64_t m = 0; m < mg; ++m) {
      const float* src = w + (grp * mg + m) * p.k;
      const int64_t panel = m / p.mr, row = m % p.mr;
      float* dst = p.packed_w.data() + ((grp * p.m_panels + panel) * p.k) * p.mr + row;
      for (int64_t k = 0; k < p.k; ++k) dst[k * p.mr] = src[k];
    }
  }
  return p;
}

void RunConvPlan(const ConvPlan& plan, const float* x, const float* residual, float* y, float* scratch,
                 ThreadPool* pool) {
  if (plan.isa == Isa::kAvx512) {
    avx512::RunConvPlan(plan, x, residual, y, scratch, pool);
  } else {
    avx2::RunConvPlan(plan, x, residual, y, scratch, pool);
  }
}

}  // namespace kiln::cpu
