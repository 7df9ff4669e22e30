// kiln.ChannelShuffle on the CPU (channel_shuffle_kernels.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"

namespace kiln::cpu {

// Where each output channel of a shuffle of parts with these channel
// counts into `groups` groups comes from.
std::vector<ChannelSource> ChannelShuffleSources(const std::vector<int64_t>& part_channels, int64_t groups);

void AddChannelShuffleKernels(std::vector<TensorKernelEntry>* kernels);

}  // namespace kiln::cpu
