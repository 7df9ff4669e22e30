// Channel permutations of nchw16c activations (see blocked_channel_gather.h).
#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"

#include <algorithm>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

// The plain loops: the reference and the kernel on CPUs without AVX-512.
void GatherBlocksPlain(const BlockedGatherPlan& plan, const float* const* inputs, float* output, int64_t n,
                       int64_t begin, int64_t end) {
  const int64_t P = plan.pixels;
  for (int64_t ob = begin; ob < end; ++ob) {
    float* out = output + (n * plan.output_blocks + ob) * P * kChannelBlock;
    std::fill(out, out + P * kChannelBlock, 0.0f);
    for (const LanePermute& lp : plan.blocks[static_cast<size_t>(ob)]) {
      const float* src[2] = {
          inputs[lp.input0] +
              (n * plan.input_blocks[static_cast<size_t>(lp.input0)] + lp.block0) * P * kChannelBlock,
          inputs[lp.input1] +
              (n * plan.input_blocks[static_cast<size_t>(lp.input1)] + lp.block1) * P * kChannelBlock};
      for (int64_t p = 0; p < P; ++p) {
        for (int l = 0; l < kChannelBlock; ++l) {
          if ((lp.mask >> l & 1) == 0) continue;
          const uint32_t i = lp.index[l];
          out[p * kChannelBlock + l] = src[i >> 4][p * kChannelBlock + (i & 15)];
        }
      }
    }
  }
}

}  // namespace

BlockedGatherPlan PlanBlockedGather(const std::vector<ChannelSource>& sources,
                                    const std::vector<int64_t>& input_channels, int64_t batch,
                                    int64_t pixels) {
  BlockedGatherPlan plan;
  plan.batch = batch;
  plan.pixels = pixels;
  for (int64_t c : input_channels) plan.input_blocks.push_back(ChannelBlocks(c));
  plan.output_blocks = ChannelBlocks(static_cast<int64_t>(sources.size()));
  plan.blocks.resize(static_cast<size_t>(plan.output_blocks));
  for (int64_t ob = 0; ob < plan.output_blocks; ++ob) {
    std::vector<LanePermute>& permutes = plan.blocks[static_cast<size_t>(ob)];
    for (int l = 0; l < kChannelBlock; ++l) {
      const size_t c = static_cast<size_t>(ob * kChannelBlock + l);
      if (c >= sources.size() || sources[c].input < 0) continue;
      const int32_t in = sources[c].input;
      const int64_t block = sources[c].channel / kChannelBlock;
      const auto lane = static_cast<uint32_t>(sources[c].channel % kChannelBlock);
      // The first permute that reads this block, or has room for a second one.
      LanePermute* lp = nullptr;
      uint32_t half = 0;
      for (LanePermute& p : permutes) {
        if (p.input0 == in && p.block0 == block) {
          lp = &p;
          half = 0;
          break;
        }
        if (p.input1 == in && p.block1 == block) {
          lp = &p;
          half = 1;
          break;
        }
      }
      if (lp == nullptr) {
        for (LanePermute& p : permutes) {
          if (p.input0 == p.input1 && p.block0 == p.block1) {
            p.input1 = in;
            p.block1 = block;
            lp = &p;
            half = 1;
            break;
          }
        }
      }
      if (lp == nullptr) {
        permutes.push_back(LanePermute{in, in, block, block, 0, {}});
        lp = &permutes.back();
        half = 0;
      }
      lp->mask = static_cast<uint16_t>(lp->mask | (1u << l));
      lp->index[l] = half * 16 + lane;
    }
  }
  return plan;
}

void RunBlockedGather(const BlockedGatherPlan& plan, const float* const* inputs, float* output,
                      ThreadPool* pool, Isa isa) {
  const bool vector = isa == Isa::kAvx512 && IsaAvailable(Isa::kAvx512);
  auto run = [&](int64_t n, int64_t begin, int64_t end) {
    if (vector) {
      BlockedGatherBlocksAvx512(plan, inputs, output, n, begin, end);
    } else {
      GatherBlocksPlain(plan, inputs, output, n, begin, end);
    }
  };
  const int64_t items = plan.batch * plan.output_blocks;
  // Below ~64 KiB the second thread costs more than it saves.
  const bool parallel = pool != nullptr && pool->num_threads() > 1 && items > 1 &&
                        items * plan.pixels * kChannelBlock * 4 >= (64 << 10);
  if (!parallel) {
    for (int64_t n = 0; n < plan.batch; ++n) run(n, 0, plan.output_blocks);
    return;
  }
  pool->ParallelFor(items, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      run(i / plan.output_blocks, i % plan.output_blocks, i % plan.output_blocks + 1);
  });
}

}  // namespace kiln::cpu
