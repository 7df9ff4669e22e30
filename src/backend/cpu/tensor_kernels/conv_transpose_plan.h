// ConvTranspose (1-d, 2-d) as kiln's convolution GEMM plus a scatter: per
// image, cols[(M/g) * kh * kw per group, H * W] = W^T x X (a grouped 1x1
// convolution over the input pixels, on conv2d_plan's vector kernels),
// then each column's taps are added into the output (col2im). The channel
// reduction happens in the GEMM; the scatter only touches M * taps * H * W
// values.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/tensor_kernels/conv2d_plan.h"

namespace kiln::cpu {

struct ConvTransposePlan {
  Window3 g;                // the ConvTranspose's geometry (g.in: its input)
  ConvPlan gemm;            // the 1x1 convolution making the columns
  std::vector<float> bias;  // [M], zeros when absent
  int64_t cols_floats = 0;  // group * M/g * taps * H * W
  int64_t ScratchFloats(int threads) const { return cols_floats + gemm.ScratchFloats(threads); }
};

// Whether the plan takes this geometry on `isa` (1-d or 2-d, vector ISA).
bool ConvTransposePlanApplies(const Window3& g, Isa isa);

// w [C, M/g, kh, kw] is re-laid out (and packed) now, or its packed form
// taken from `slot` (a compiled artifact's); bias may be null.
ConvTransposePlan MakeConvTransposePlan(const Window3& g, const float* w, const float* bias, Isa isa,
                                        int threads, const LaidOutSlot& slot = {});

// x [N, C, H, W] -> y [N, M, OH, OW]; scratch holds ScratchFloats(threads).
void RunConvTransposePlan(const ConvTransposePlan& plan, const float* x, float* y, float* scratch,
                          ThreadPool* pool);

}  // namespace kiln::cpu
