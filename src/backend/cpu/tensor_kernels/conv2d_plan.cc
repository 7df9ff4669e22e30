// Choosing and packing kiln's own 2-d convolution (see conv2d_plan.h).
#include "backend/cpu/tensor_kernels/conv2d_plan.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

// The AVX2 register tile (conv2d_avx2.cc): 6 channels x 2 vectors of 8.
constexpr int kAvx2Mr = 6;
constexpr int kAvx2Nr = 16;

// Weights [M, K] as [group][panel][k][mr], zero rows past the group's channels.
// The layout's name for LaidOutWeights.
constexpr const char* kPanelLayout = "kiln-conv-panels";

void PackPanels(const Window3& g, const float* w, const LaidOutSlot& slot, ConvPlan* p) {
  const int64_t mg = g.GroupOut();
  const auto floats = static_cast<size_t>(g.group * p->m_panels * p->k * p->mr);
  if (slot.Adopt(kPanelLayout, floats, &p->packed_w)) return;
  p->packed_w.assign(floats, 0.0f);
  for (int64_t grp = 0; grp < g.group; ++grp) {
    for (int64_t m = 0; m < mg; ++m) {
      const float* src = w + (grp * mg + m) * p->k;
      const int64_t panel = m / p->mr, row = m % p->mr;
      float* dst = p->packed_w.data() + ((grp * p->m_panels + panel) * p->k) * p->mr + row;
      for (int64_t k = 0; k < p->k; ++k) dst[k * p->mr] = src[k];
    }
  }
  slot.Record(kPanelLayout, p->packed_w);
}

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The direct path's row pitch and tile count (see conv2d_plan.h).
struct DirectShape {
  int64_t padded_h, padded_w, phase_h, phase_w, tiles;
};

DirectShape DirectShapeOf(const Window3& g) {
  DirectShape d;
  d.padded_h = g.in[1] + g.pad_begin[1] + g.pad_end[1];
  d.padded_w = g.in[2] + g.pad_begin[2] + g.pad_end[2];
  d.phase_h = CeilDiv(d.padded_h, g.stride[1]);
  d.phase_w = CeilDiv(d.padded_w, g.stride[2]);
  // Stride 1: one gap of zeros between rows serves as the right pad of one
  // and the left pad of the next.
  if (g.stride[2] == 1) d.phase_w = g.in[2] + std::max(g.pad_begin[2], g.pad_end[2]);
  const int64_t virtual_pixels = (g.out[1] - 1) * d.phase_w + g.out[2];
  d.tiles = CeilDiv(virtual_pixels, kAvx2DirectNr);
  return d;
}

// The plan of the direct path: weights as the GEMM packs them (k = channel *
// taps + tap), the phase-split input's geometry, the tap offsets.
void PlanDirect(const Window3& g, const float* w, int threads, const LaidOutSlot& slot, ConvPlan* p) {
  const DirectShape d = DirectShapeOf(g);
  const int64_t sh = g.stride[1], sw = g.stride[2];
  p->path = ConvPath::kDirect;
  p->mr = kAvx2DirectMr;
  p->nr = kAvx2DirectNr;
  p->m_panels = CeilDiv(g.out_channels, p->mr);
  p->phase_h = d.phase_h;
  p->phase_w = d.phase_w;
  p->tiles = d.tiles;
  const int64_t sub_plane = d.phase_h * d.phase_w;
  p->channel_stride = sh * sw * sub_plane;
  int64_t max_offset = 0;
  for (int64_t ki = 0; ki < g.kernel[1]; ++ki) {
    for (int64_t kj = 0; kj < g.kernel[2]; ++kj) {
      const int64_t ri = ki * g.dilation[1], rj = kj * g.dilation[2];
      const int64_t offset = ((ri % sh) * sw + rj % sw) * sub_plane + (ri / sh) * d.phase_w + rj / sw;
      p->tap_offsets.push_back(offset);
      max_offset = std::max(max_offset, offset);
    }
  }
  // Cache blocking, as a GEMM's over K: the input one tile reads over a
  // block of channels stays in L1 (16 KB) while the m panels of a unit pass
  // over it, their weights from L2; partial sums wait in a per-thread buffer
  // between channel blocks. Blocks of at least 128 and at most 512 k
  // (channels x taps): shorter ones lose more to the tile's loads and stores
  // of its sums. One tile per chunk, except where the weights do not stay in
  // L2 (half of 1 MB): then a unit's weights (its m panels) serve 8 tiles
  // from L2 (a tile takes 4 bytes of weights per 32 FLOP, more than L3
  // gives two cores), and on small images, whose tiles read the same rows.
  const int64_t taps = g.kernel[1] * g.kernel[2];
  const int64_t weight_bytes = 4 * g.out_channels * p->k;
  p->tiles_per_chunk = d.tiles <= 8 || weight_bytes > 512 * 1024 ? std::min<int64_t>(d.tiles, 8) : 1;
  // A tile's reads per channel: its rows (a vector's worth more, as loads
  // straddle lines), in each stride phase.
  const int64_t rows_read = (g.kernel[1] - 1) * g.dilation[1] / sh + 1;
  const int64_t floats_per_channel = sh * sw * std::min(sub_plane, p->nr + 16 + (rows_read - 1) * d.phase_w);
  const int64_t fit = (16 * 1024 / 4) / floats_per_channel;
  p->channels_per_block = std::clamp<int64_t>(
      std::clamp<int64_t>(fit, CeilDiv(128, taps), std::max<int64_t>(1, 512 / taps)), 1, g.in_channels);
  // Evenly sized channel blocks.
  const int64_t channel_blocks = CeilDiv(g.in_channels, p->channels_per_block);
  p->channels_per_block = CeilDiv(g.in_channels, channel_blocks);
  // Enough units for an even static split: chunks x blocks of m panels.
  const int64_t chunks = CeilDiv(d.tiles, p->tiles_per_chunk);
  const int64_t wanted_units = 16 * std::max(1, threads);
  p->m_blocks = std::clamp<int64_t>(CeilDiv(wanted_units, chunks), 1, p->m_panels);
  p->panels_per_block = CeilDiv(p->m_panels, p->m_blocks);
  p->m_blocks = CeilDiv(p->m_panels, p->panels_per_block);
  // Every tile's whole-vector loads stay inside: the last channel's plane
  // plus the reach of the furthest tap from the last tile.
  const int64_t slack = std::max<int64_t>(0, max_offset + d.tiles * p->nr - p->channel_stride);
  p->scratch_floats_shared = g.in_channels * p->channel_stride + slack;
  if (channel_blocks > 1)
    p->scratch_floats_per_thread = p->tiles_per_chunk * p->panels_per_block * p->mr * p->nr;
  PackPanels(g, w, slot, p);
}

}  // namespace

bool ConvDirectApplies(const Window3& g, Isa isa) {
  if (isa != Isa::kAvx2 || g.group != 1 || g.in[0] != 1 || g.kernel[0] != 1 || g.out[0] != 1) return false;
  // A 1x1 stride-1 layer without pads has no im2col to save: the GEMM reads
  // its input in place, or packs it once on small images, as fast or faster.
  const bool pointwise = g.kernel[1] == 1 && g.kernel[2] == 1 && g.stride[1] == 1 && g.stride[2] == 1 &&
                         g.pad_begin[1] == 0 && g.pad_begin[2] == 0 && g.pad_end[1] == 0 && g.pad_end[2] == 0;
  if (pointwise) return false;
  for (int a = 1; a < 3; ++a) {
    if (g.pad_begin[a] < 0 || g.pad_end[a] < 0) return false;
  }
  // The dropped columns must not cost more than the GEMM's last partial panel
  // and im2col do: useful pixels over computed ones at least 0.8 of the GEMM's.
  const DirectShape d = DirectShapeOf(g);
  const double pixels = static_cast<double>(g.OutPixels());
  const double direct_use = pixels / static_cast<double>(d.tiles * kAvx2DirectNr);
  const double gemm_use = pixels / static_cast<double>(CeilDiv(g.OutPixels(), kAvx2Nr) * kAvx2Nr);
  return direct_use >= 0.8 * gemm_use;
}

bool ConvPlanApplies(const Window3& g, Isa isa) {
  return (isa == Isa::kAvx2 || isa == Isa::kAvx512) && g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1;
}

ConvPlan MakeConvPlan(const Window3& g, const FusedEpilogue& epilogue, const float* w, const float* bias,
                      Isa isa, int threads, const LaidOutSlot& slot) {
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
    // Depthwise weights are read as they are: [M][kh*kw].
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
  if (ConvDirectApplies(g, isa)) {
    PlanDirect(g, w, threads, slot, &p);
    return p;
  }
  p.path = ConvPath::kGemm;
  // Register tiles: AVX-512 8 channels x 3 vectors (24 of 32 registers
  // accumulate), AVX2 6 channels x 2 vectors (12 of 16).
  p.mr = isa == Isa::kAvx512 ? kAvx512Mr : kAvx2Mr;
  p.nr = isa == Isa::kAvx512 ? kAvx512Nv * 16 : kAvx2Nr;
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
  PackPanels(g, w, slot, &p);
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
