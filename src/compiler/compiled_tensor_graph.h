// An N-dimensional tensor graph (an imported ONNX model at one set of input
// shapes) compiled for this machine: the four stages once, then one Program
// that runs on the caller's input and output buffers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compilation_codec.h"
#include "compiler/compiled_model.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class SharedArenas;
class ThreadPool;

struct TensorCompileOptions {
  std::string backend = "cpu";  // the target; what it cannot run falls back to the CPU
  Precision precision = Precision::kFp32;
  bool fuse = true;  // conv + bias + activation (+ residual), and the other tensor fusions
  bool layouts = true;  // activation layouts other than row-major where a backend wants them
  int threads = 0;   // the threads runs will use (for the report)
  // Constants already in their kernels' layouts (a compiled artifact's), and
  // where the kernels record those they lay out (graph/laid_out_weights.h).
  std::shared_ptr<LaidOutWeights> laid_out;
  // The activation arena to share with other graphs that never run at the
  // same time as this one (compiler/shared_arenas.h); null: an arena of its
  // own. `arena_user` names this graph in the shared arena's accounting.
  std::shared_ptr<SharedArenas> shared_arenas;
  std::string arena_user;
  // Keep the graph after the stages and its plan (kept()), for an artifact
  // to store.
  bool keep_compilation = false;
};

class CompiledTensorGraph {
 public:
  // `inputs`/`outputs`: the graph's input and output values, whose io_slot
  // is their index (inputs first, then outputs). `folded`: what the
  // importer folded, for the plan.
  static Expected<std::unique_ptr<CompiledTensorGraph>> Compile(Graph graph, std::vector<ValueId> inputs,
                                                                std::vector<ValueId> outputs,
                                                                const TensorCompileOptions& options,
                                                                std::vector<std::string> folded = {});
  // A graph an artifact stored (kept() at its compile, encoded by
  // EncodeTensorCompilation): its constants' layouts are adopted from
  // options.laid_out and its Program bound on the stored plan; no stage
  // runs. Its inputs and outputs are its values with an io slot.
  static Expected<std::unique_ptr<CompiledTensorGraph>> FromStored(StoredCompilation stored,
                                                                   const TensorCompileOptions& options);
  ~CompiledTensorGraph();

  // With TensorCompileOptions::keep_compilation: the graph after the
  // stages, before packing, with its plan and report (no key).
  const std::optional<StoredCompilation>& kept() const { return kept_; }

  const Graph& graph() const { return graph_; }
  const CompileReport& report() const { return report_; }
  std::vector<TensorType> input_types() const;
  std::vector<TensorType> output_types() const;
  // Floating-point operations of one run (for GFLOP/s).
  double flops() const { return flops_; }
  // The implementation bound for the node named `node` (Step::kernel);
  // empty where the backend names none or no step has that name.
  std::string KernelOf(const std::string& node) const;

  // One run: reads inputs[i] (of input_types()[i]) and writes outputs[j].
  // Errors a kernel reports from run-time values (an index out of range)
  // come back here. Not reentrant, nor beside another graph of the same
  // shared arenas. A graph whose shared arena grew since it was bound is
  // bound again first.
  Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, ThreadPool* pool,
             const DumpFn* dump = nullptr);

 private:
  CompiledTensorGraph() = default;
  // Stage 4 against these arena bases (again when a shared arena grew).
  Status Bind(const std::map<int32_t, uint8_t*>& bases);
  // Packing, the plan (`stored_plan` when given), the arena and binding.
  Status PackPlanAndBind(const TensorCompileOptions& options, const MemoryPlan* stored_plan);

  Graph graph_;
  std::vector<ValueId> inputs_, outputs_;
  CompileReport report_;
  PackedWeights packed_;
  MemoryPlan plan_;
  std::vector<DomainBuffer> arenas_;  // its own, when not shared
  std::shared_ptr<SharedArenas> shared_arenas_;
  uint64_t bound_generation_ = 0;  // of shared_arenas_ when bound
  std::unique_ptr<Program> program_;
  std::vector<void*> io_;  // per run, sized once
  double flops_ = 0;
  std::optional<StoredCompilation> kept_;
};

// The plan text of a tensor graph: CompileReport::ToString plus the folded
// nodes and, per node, its placement, implementation and output type.
std::string TensorPlanText(const CompiledTensorGraph& compiled, bool per_node);

}  // namespace kiln
