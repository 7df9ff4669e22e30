// What compiling a language model produced, as bytes a .kiln artifact
// stores, so that loading it binds Programs without running the stages
// again: the graph after legalize, fuse and layout (before its weights are
// packed: the artifact holds the packed forms, which the backends adopt),
// the memory plan of every bucket, and the report the --plan text is
// printed from. Weights are named, memory domains too, so that a load maps
// them to this process's weights and domains.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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

// A tensor graph's (an imported ONNX model's) constants are large: an
// artifact stores them in sections of their own, where they are mapped and
// used in place. Encoding asks where each constant's bytes are stored
// (nullopt: in the graph's bytes); decoding asks for them back by section,
// offset and size.
struct ConstantPlacement {
  std::string section;
  uint64_t offset = 0;
};
using LocateConstant = std::function<Expected<std::optional<ConstantPlacement>>(const TensorData&)>;
using ResolveConstant =
    std::function<Expected<SharedBytes>(const std::string& section, uint64_t offset, uint64_t bytes)>;

// The same for a graph whose nodes read no weights of a store.
Expected<std::vector<uint8_t>> EncodeTensorCompilation(const StoredCompilation& c, const LocateConstant& locate);
Expected<StoredCompilation> DecodeTensorCompilation(std::span<const uint8_t> bytes,
                                                    const std::map<std::string, int32_t>& domain_ids,
                                                    const ResolveConstant& resolve);

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
