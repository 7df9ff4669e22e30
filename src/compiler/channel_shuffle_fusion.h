// Stage 3 for tensor graphs: ShuffleNet's channel shuffle,
//   [Concat (axis 1) ->] Reshape [N, g, C/g, H, W] -> Transpose [0, 2, 1, 3, 4]
//   -> Reshape [N, C, H, W],
// becomes one kiln.ChannelShuffle (graph/tensor_ops/channel_shuffle_op.cc)
// of the concatenated parts, where all of it runs on one backend that has
// the op. As one op of 4-d values it can stay in a blocked layout, where
// the 5-d reshapes cannot. The intermediate values must have no other
// reader and not be graph outputs.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

// Marks the fused nodes dead (the caller compacts).
Status FuseChannelShuffles(Graph& g, const BackendRegistry& backends, std::vector<std::string>* log);

}  // namespace kiln
