// What compiling a language model produced, as bytes a .kiln artifact
// stores, so that loading it binds Programs without running the stages
// again: the graph after legalize, fuse and layout (before its weights are
// packed: the artifact holds the packed forms, which the backends adopt),
// the memory plan of every bucket, and the report the --plan text is
// printed from. Weights are named, memory domains too, so that a load maps
// them to this process's weights and domains.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "compiler/compiled_model.h"
#include "compiler/layout.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class WeightStore;

struct StoredCompilation {
  // The options it was compiled for (CompilationKey); a load with others
  // compiles again.
  std::string key;
  Graph graph;
  std::vector<MemoryPlan> plans;  // ascending bucket capacity
  // Legalize, fuse and the layout stage's transfers and KV placement;
  // the packed-weight lines are made again when the backends adopt them.
  CompileReport report;
};

// Bytes of `c`. The graph's weights must be `weights`' own (they are
// stored by name).
Expected<std::vector<uint8_t>> EncodeCompilation(const StoredCompilation& c, const WeightStore& weights);

// The key alone, read without decoding the rest.
Expected<std::string> CompilationKeyOf(std::span<const uint8_t> bytes);

// Reads what EncodeCompilation wrote. Weight names are looked up in
// `weights`; memory domain names in `domain_ids` (name -> this process's
// id), every stored domain id being replaced by the current one. Every id,
// enum and count is checked, the graph validated, and every planned buffer
// checked to hold its value at its bucket's sizes and to lie inside its
// domain's arena: a corrupt plan is an error naming what is wrong, never
// a buffer bound out of bounds.
Expected<StoredCompilation> DecodeCompilation(std::span<const uint8_t> bytes, const WeightStore& weights,
                                              const std::map<std::string, int32_t>& domain_ids);

// The options a compilation is stored under: a load with the same ones
// binds the stored graph and plans.
std::string CompilationKey(const ModelConfig& config, const CompileOptions& options, int64_t max_model_len);

// Checks stored plans' scratch buffers against what the kernels bound in
// this process ask for (`scratch[b][i]`: node i's need at plan b's sizes).
Status CheckStoredScratch(const Graph& g, const std::vector<MemoryPlan>& plans,
                          const std::vector<std::vector<size_t>>& scratch);

}  // namespace kiln
