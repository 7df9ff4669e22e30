// The pools on nchw16c activations (see pooling.h): MaxPool and AveragePool
// (2-d, without MaxPool's Indices) and the global max and average pools,
// each output pixel a vector over a block's 16 channels. Rows of output
// (image, channel block, output row) go to the pool's threads.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/blocked_pool_loops.h"
#include "backend/cpu/tensor_kernels/conv_window.h"
#include "backend/cpu/tensor_kernels/pooling.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

bool F32Rank4(const TensorKernelArgs& args) {
  return args.inputs[0].dtype == DType::kF32 && args.inputs[0].rank() == 4 && args.outputs[0].rank() == 4;
}

struct BlockedPoolPlan {
  BlockedPoolJob job;  // without the buffers
  std::vector<BlockedPoolTaps> th, tw;
  int64_t rows = 0;
  BlockedPoolRowsFn rows_fn = nullptr;
  // MaxPool with stride 1 down the image: planes by rows then columns, each
  // thread with its own rows of `row_floats` in the scratch.
  BlockedMaxPoolSeparableFn separable = nullptr;
  int64_t planes = 0, row_floats = 0;
  int threads = 1;
};

}  // namespace

bool PoolTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || !F32Rank4(args) || args.outputs.size() != 1) return false;
  if (args.op_type != "MaxPool" && args.op_type != "AveragePool") return false;
  return PoolGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims).ok();
}

bool GlobalPoolTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  return layout == TensorLayout::kNCHW16c && F32Rank4(args) &&
         (args.op_type == "GlobalMaxPool" || args.op_type == "GlobalAveragePool");
}

Expected<TensorKernel> MakeBlockedPool(const TensorKernelArgs& args) {
  if (!PoolTakesLayout(TensorLayout::kNCHW16c, args)) {
    return Unsupported("{} {}: nchw16c activations need a 2-d f32 MaxPool or AveragePool without Indices",
                       args.op_type, args.node);
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry geometry,
                        PoolGeometry(args.op_type, args.node, args.a(), args.inputs[0].dims));
  const Window3 g = ToWindow3(geometry);
  auto plan = std::make_shared<BlockedPoolPlan>();
  for (int64_t o = 0; o < g.out[1]; ++o) plan->th.push_back(PoolAxisTaps(g, 1, o));
  for (int64_t o = 0; o < g.out[2]; ++o) plan->tw.push_back(PoolAxisTaps(g, 2, o));
  BlockedPoolJob& j = plan->job;
  j.in_h = g.in[1];
  j.in_w = g.in[2];
  j.out_h = g.out[1];
  j.out_w = g.out[2];
  j.dilation_h = g.dilation[1];
  j.dilation_w = g.dilation[2];
  j.th = plan->th.data();
  j.tw = plan->tw.data();
  j.is_max = args.op_type == "MaxPool";
  j.count_include_pad = IntAttrOr(args.a(), "count_include_pad", 0) != 0;
  j.blocks = ChannelBlocks(g.in_channels);
  j.last_block_channels = g.in_channels - (j.blocks - 1) * kChannelBlock;
  plan->rows = g.batch * j.blocks * j.out_h;
  plan->rows_fn = BlockedPoolRowsFor(BestIsa());
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(BestIsa()) + "-nchw16c";
  if (j.is_max && g.stride[1] == 1 && g.kernel[1] > 1) {
    plan->separable = BlockedMaxPoolSeparableFor(BestIsa());
    plan->planes = g.batch * j.blocks;
    // Rounded to 16 floats so that each thread's rows start 64-byte aligned.
    plan->row_floats = (j.in_h * j.out_w * kChannelBlock + 15) / 16 * 16;
    plan->threads = std::max(1, args.num_threads);
    k.scratch_bytes = sizeof(float) * static_cast<size_t>(plan->row_floats * plan->threads);
    k.impl += "-separable";
  }
  k.run = [plan](const TensorCall& call) {
    BlockedPoolJob job = plan->job;
    job.x = static_cast<const float*>(call.inputs[0]);
    job.y = static_cast<float*>(call.outputs[0]);
    if (plan->separable != nullptr) {
      auto* rows = reinterpret_cast<float*>(call.scratch);
      // More threads than the scratch was sized for run on the caller alone.
      if (call.pool == nullptr || call.pool->num_threads() <= 1 || call.pool->num_threads() > plan->threads) {
        plan->separable(job, rows, 0, plan->planes);
      } else {
        call.pool->ParallelFor(plan->planes, 1, [&](int64_t b, int64_t e, int thread) {
          plan->separable(job, rows + thread * plan->row_floats, b, e);
        });
      }
      return Status::Ok();
    }
    if (call.pool == nullptr || call.pool->num_threads() <= 1) {
      plan->rows_fn(job, 0, plan->rows);
    } else {
      // Rows of at least ~4K output floats each.
      const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, job.out_w * kChannelBlock));
      call.pool->ParallelFor(plan->rows, grain, [&](int64_t b, int64_t e, int) { plan->rows_fn(job, b, e); });
    }
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeBlockedGlobalPool(const TensorKernelArgs& args) {
  if (!GlobalPoolTakesLayout(TensorLayout::kNCHW16c, args)) {
    return Unsupported("{} {}: nchw16c activations need a 2-d f32 GlobalMaxPool or GlobalAveragePool",
                       args.op_type, args.node);
  }
  const auto& d = args.inputs[0].dims;
  BlockedGlobalPoolJob job;
  job.pixels = d[2] * d[3];
  job.is_max = args.op_type == "GlobalMaxPool";
  const int64_t planes = d[0] * ChannelBlocks(d[1]);
  const BlockedGlobalPoolFn fn = BlockedGlobalPoolFor(BestIsa());
  if (job.pixels == 0) {
    return Unsupported("{} {}: an empty image has no global pool", args.op_type, args.node);
  }
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(BestIsa()) + "-nchw16c";
  k.run = [job, planes, fn](const TensorCall& call) {
    BlockedGlobalPoolJob j = job;
    j.x = static_cast<const float*>(call.inputs[0]);
    j.y = static_cast<float*>(call.outputs[0]);
    if (call.pool == nullptr || call.pool->num_threads() <= 1) {
      fn(j, 0, planes);
    } else {
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, j.pixels * kChannelBlock));
      call.pool->ParallelFor(planes, grain, [&](int64_t b, int64_t e, int) { fn(j, b, e); });
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
