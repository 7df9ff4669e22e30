// ReduceMean over the height and width of nchw16c activations (the global
// average a classifier head writes as x.mean([2, 3])): the blocked global
// average pool's loops, so the last convolution's output need not be
// reordered to row-major first. keepdims = 1 writes [N, C, 1, 1] blocked;
// keepdims = 0 writes [N, C] row-major (values of rank 2 stay row-major).
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/blocked_pool_loops.h"
#include "backend/cpu/tensor_kernels/blocked_spatial_mean.h"
#include "core/thread_pool.h"

namespace kiln::cpu {
namespace {

// The reduced axes (attribute before opset 18, else a constant input),
// sorted and made non-negative; nothing when they are not known now.
std::optional<std::vector<int64_t>> ReducedAxes(const TensorKernelArgs& args, int64_t rank) {
  std::vector<int64_t> axes;
  if (auto a = args.a().Ints("axes"); a.ok()) {
    axes = *a;
  } else if (args.has(1)) {
    if (args.constants.size() < 2 || args.constants[1] == nullptr ||
        args.constants[1]->type().dtype != DType::kI64)
      return std::nullopt;
    const TensorData& t = *args.constants[1];
    const auto* v = t.As<int64_t>();
    axes.assign(v, v + t.type().ElementCount());
  } else {
    return std::nullopt;  // every axis (or none, with noop_with_empty_axes)
  }
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

}  // namespace

bool SpatialMeanTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || args.op_type != "ReduceMean" || args.outputs.size() != 1 ||
      args.inputs[0].rank() != 4 || args.inputs[0].dtype != DType::kF32 || !BlockedInput(args, 0))
    return false;
  const auto axes = ReducedAxes(args, 4);
  const std::vector<int64_t>& d = args.inputs[0].dims;
  return axes && *axes == std::vector<int64_t>{2, 3} && d[2] * d[3] > 0;
}

Expected<TensorKernel> MakeBlockedSpatialMean(const TensorKernelArgs& args) {
  if (!SpatialMeanTakesLayout(TensorLayout::kNCHW16c, args)) {
    return Unsupported("{} {}: nchw16c activations need an f32 rank-4 input reduced over axes 2 and 3",
                       args.op_type, args.node);
  }
  const std::vector<int64_t>& d = args.inputs[0].dims;
  const bool keep = args.outputs[0].rank() == 4;
  BlockedGlobalPoolJob job;
  job.pixels = d[2] * d[3];
  job.is_max = false;
  const int64_t images = d[0], channels = d[1], blocks = ChannelBlocks(d[1]), planes = images * blocks;
  const Isa isa = BestIsa();
  const BlockedGlobalPoolFn fn = BlockedGlobalPoolFor(isa);
  // Row-major [N, C] is the blocked result itself when C fills its blocks;
  // otherwise the means go through scratch (the output has no padding).
  const bool direct = keep || channels % kChannelBlock == 0;
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(isa) + "-nchw16c";
  k.scratch_bytes = direct ? 0 : static_cast<size_t>(planes * kChannelBlock) * sizeof(float);
  k.run = [job, planes, fn, direct, images, channels, blocks](const TensorCall& call) {
    BlockedGlobalPoolJob j = job;
    j.x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    j.y = direct ? y : reinterpret_cast<float*>(call.scratch);
    if (call.pool == nullptr || call.pool->num_threads() <= 1) {
      fn(j, 0, planes);
    } else {
      const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, j.pixels * kChannelBlock));
      call.pool->ParallelFor(planes, grain, [&](int64_t b, int64_t e, int) { fn(j, b, e); });
    }
    if (!direct) {
      for (int64_t n = 0; n < images; ++n) {
        std::memcpy(y + n * channels, j.y + n * blocks * kChannelBlock,
                    static_cast<size_t>(channels) * sizeof(float));
      }
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace kiln::cpu
