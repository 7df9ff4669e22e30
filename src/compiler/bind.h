// Stage 4, bind: turns the placed, fused and laid-out graph into one
// Program per token-count bucket, each kernel call with its buffers, packed
// weights and static arguments resolved.
#pragma once

#include <map>
#include <memory>

#include "backend/backend.h"
#include "compiler/layout.h"
#include "compiler/program.h"

namespace kiln {

struct BindInputs {
  const Graph* graph = nullptr;
  const MemoryPlan* plan = nullptr;
  std::map<int32_t, uint8_t*> arena_base;  // per domain
  const PackedWeights* packed = nullptr;
  const BackendRegistry* backends = nullptr;
  KvCacheLayout kv_layout;
  int64_t max_positions = 0;
};

Expected<std::unique_ptr<Program>> BindProgram(const BindInputs& in);

// Scratch bytes each node needs at `env` (asked of its backend).
std::vector<size_t> ScratchNeeds(const Graph& g, const BackendRegistry& backends, const ShapeEnv& env);

}  // namespace kiln
