// Channel permutations and windows of nchw16c activations (a channel
// shuffle, a slice or split along the channels at any offset): every output
// channel is one channel of one input at the same pixel. The plan says, per
// output block of 16 channels, from which input blocks its lanes come; a
// run then moves 16 floats per pixel with at most a few two-source lane
// permutes (one AVX-512 instruction each), the padding lanes zero.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/isa.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// Where one output channel comes from; input < 0: a padding lane (zero).
struct ChannelSource {
  int32_t input = -1;
  int64_t channel = 0;
};

// Lanes of one output block taken from at most two input blocks at the
// same pixel: lane l (bit l of mask) is lane index[l] of the pair, 0..15
// from the first block, 16..31 from the second (as vpermt2ps reads them).
struct LanePermute {
  int32_t input0 = 0, input1 = 0;  // inputs
  int64_t block0 = 0, block1 = 0;  // channel blocks in them
  uint16_t mask = 0;
  uint32_t index[16] = {};
};

struct BlockedGatherPlan {
  int64_t batch = 1, pixels = 1;
  std::vector<int64_t> input_blocks;  // channel blocks of each input
  int64_t output_blocks = 0;
  // Per output block: its permutes (none: the block is all padding).
  std::vector<std::vector<LanePermute>> blocks;
};

// The plan for an output of sources.size() channels (padded to 16) from
// inputs of input_channels[i] channels, all of `batch` images of `pixels`
// pixels.
BlockedGatherPlan PlanBlockedGather(const std::vector<ChannelSource>& sources,
                                    const std::vector<int64_t>& input_channels, int64_t batch,
                                    int64_t pixels);

// Runs the plan on nchw16c buffers (isa kAvx512: the vector kernel, where
// the CPU has it; otherwise the plain loops).
void RunBlockedGather(const BlockedGatherPlan& plan, const float* const* inputs, float* output,
                      ThreadPool* pool, Isa isa);

// The vector kernel for output blocks [begin, end) of image n
// (blocked_channel_gather_avx512.cc).
void BlockedGatherBlocksAvx512(const BlockedGatherPlan& plan, const float* const* inputs, float* output,
                               int64_t n, int64_t begin, int64_t end);

}  // namespace kiln::cpu
