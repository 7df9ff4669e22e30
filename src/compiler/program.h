// A Program: the ordered kernel calls of one compiled bucket, with every
// buffer bound. Running it allocates nothing on the host's path (an
// accelerator's queue may).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/profiler.h"

namespace kiln {

// Called after each step for each value it produced (generate --dump,
// kiln diff): the value's name, its memory and its actual row count.
using DumpFn = std::function<void(const std::string& name, const BoundValue& value, int64_t rows)>;

// A domain's part of the arena a Program uses, discarded after each pass.
struct ArenaSpan {
  Backend* owner = nullptr;
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

// For tests: drops one kind of synchronization, to show that the test
// accelerators' poisoning makes its absence fail.
enum class SyncFault { kNone, kSkipEventWaits, kSkipFinalSync };
void SetSyncFaultForTesting(SyncFault fault);

class Program {
 public:
  // `domain_owners`: the backend owning each memory domain (for dumps).
  // `graph`: the graph the steps were bound from, one step per node in
  // order (read here only); with it, profiled runs record each kernel's
  // shapes, bytes and FLOPs (without it, names and times).
  Program(ShapeEnv capacity, std::vector<Step> steps,
          std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs,
          std::vector<ArenaSpan> arenas = {}, std::map<int32_t, Backend*> domain_owners = {},
          const Graph* graph = nullptr);

  const ShapeEnv& capacity() const { return capacity_; }
  const std::vector<Step>& steps() const { return steps_; }

  // Enqueues every step in order on its executor's stream; where
  // consecutive steps run on different streams, an event recorded on the
  // first orders the second (so every value that crosses streams is
  // ordered). Returns once every stream used has finished: the logits are
  // then the caller's to read; errors are those the streams report.
  // After a kv_write step (Step::kv_layer), a batch's on_kv_layer_written
  // is called with the layer, its stream synchronized first.
  // While profiling, each step is timed to its stream's end (a stream that
  // is not inline is synchronized after each step) and recorded.
  // REQUIRES: the batch fits capacity() (the caller checks; see
  // CompiledModel::Forward); one Run at a time.
  Status Run(const RunState& state, const DumpFn* dump = nullptr) const;

 private:
  ShapeEnv capacity_;
  std::vector<Step> steps_;
  std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs_;
  std::vector<ArenaSpan> arenas_;
  std::map<int32_t, Backend*> domain_owners_;
  // events_[i]: recorded on step i - 1's stream before step i when their
  // streams differ; null otherwise.
  std::vector<std::unique_ptr<Event>> events_;
  std::vector<Stream*> streams_;  // each stream the steps use, once
  // For profiling: what each step is and costs.
  std::vector<std::shared_ptr<const KernelInfo>> kernels_;
};

}  // namespace kiln
