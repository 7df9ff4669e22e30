// The CPU's kernel of kiln.ChannelShuffle (graph/tensor_ops/channel_shuffle_op.cc):
// row-major, one plane copy per output channel; nchw16c, the lane permutes
// of blocked_channel_gather.h.
#include <cstring>
#include <memory>

#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/channel_shuffle_kernels.h"
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

using shape_kernels::MovableDTypes;
using shape_kernels::MovableElementBytes;

std::vector<ChannelSource> ChannelShuffleSources(const std::vector<int64_t>& part_channels, int64_t groups) {
  int64_t total = 0;
  for (int64_t c : part_channels) total += c;
  std::vector<ChannelSource> sources(static_cast<size_t>(total));
  const int64_t per_group = total / groups;
  for (int64_t c = 0; c < total; ++c) {
    int64_t joined = (c % groups) * per_group + c / groups;  // the channel of the parts joined
    int32_t part = 0;
    while (joined >= part_channels[static_cast<size_t>(part)])
      joined -= part_channels[static_cast<size_t>(part++)];
    sources[static_cast<size_t>(c)] = {part, joined};
  }
  return sources;
}

namespace {

bool ChannelShuffleTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || args.outputs.size() != 1 || args.outputs[0].dtype != DType::kF32)
    return false;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (!BlockedInput(args, i)) return false;  // a constant part would be row-major
  }
  return true;
}

Expected<TensorKernel> MakeChannelShuffle(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  auto groups = args.a().Int("groups");
  const std::vector<int64_t>& dims = args.outputs[0].dims;
  if (!groups.ok() || *groups < 1 || dims.size() != 4 || dims[1] % *groups != 0) {
    return InvalidArgument("{} {}: needs 4-d parts and channels that split into 'groups'", args.op_type,
                           args.node);
  }
  std::vector<int64_t> part_channels;
  for (const TensorType& t : args.inputs) part_channels.push_back(t.dims[1]);
  const std::vector<ChannelSource> sources = ChannelShuffleSources(part_channels, *groups);
  const int64_t pixels = dims[2] * dims[3];
  TensorKernel k;
  if (NodeIsNchw16c(args)) {
    if (!ChannelShuffleTakesLayout(TensorLayout::kNCHW16c, args)) {
      return Unsupported("{} {}: nchw16c activations need f32 parts computed at run time", args.op_type,
                         args.node);
    }
    auto plan =
        std::make_shared<const BlockedGatherPlan>(PlanBlockedGather(sources, part_channels, dims[0], pixels));
    const Isa isa = BestIsa();
    k.impl = std::string("kiln-") + IsaName(isa == Isa::kAvx512 ? isa : Isa::kScalar) + "-nchw16c";
    k.run = [plan, isa](const TensorCall& call) {
      RunBlockedGather(*plan, reinterpret_cast<const float* const*>(call.inputs),
                       static_cast<float*>(call.outputs[0]), call.pool, isa);
      return Status::Ok();
    };
    return k;
  }
  // Row-major: each output channel is one plane of one part.
  auto planes = std::make_shared<std::vector<ChannelSource>>(sources);
  auto channels = std::make_shared<std::vector<int64_t>>(part_channels);
  const int64_t batch = dims[0];
  const size_t plane_bytes = static_cast<size_t>(pixels) * elem;
  k.impl = "memcpy-planes";
  k.run = [planes, channels, batch, plane_bytes](const TensorCall& call) {
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    const int64_t c_out = static_cast<int64_t>(planes->size());
    auto copy = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = i / c_out;
        const ChannelSource& s = (*planes)[static_cast<size_t>(i % c_out)];
        const int64_t c_in = (*channels)[static_cast<size_t>(s.input)];
        std::memcpy(out + static_cast<size_t>(i) * plane_bytes,
                    static_cast<const uint8_t*>(call.inputs[s.input]) +
                        static_cast<size_t>(n * c_in + s.channel) * plane_bytes,
                    plane_bytes);
      }
    };
    const int64_t items = batch * c_out;
    if (call.pool != nullptr && call.pool->num_threads() > 1 &&
        items * static_cast<int64_t>(plane_bytes) >= (64 << 10)) {
      call.pool->ParallelFor(items, [&](int64_t b, int64_t e, int) { copy(b, e); });
    } else {
      copy(0, items);
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddChannelShuffleKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"kiln.ChannelShuffle", MakeChannelShuffle, MovableDTypes(),
                      "4-d parts joined along the channels; nchw16c for f32", ChannelShuffleTakesLayout});
}

}  // namespace kiln::cpu
