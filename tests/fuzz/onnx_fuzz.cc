// Fuzzes the ONNX reader, then checks what it promises of a model it
// accepts: every tensor's bytes match its shape and element type, and the
// main graph's nodes come after the producers of their inputs.
#include <cstdint>
#include <set>
#include <string>

#include "onnx/onnx_reader.h"

namespace {

void CheckTensor(const kiln::OnnxTensor& t) {
  auto bytes = kiln::DTypeBytes(t.dtype, static_cast<uint64_t>(t.element_count()));
  if (!bytes || *bytes != t.data.size()) __builtin_trap();
}

void CheckGraph(const kiln::OnnxGraph& g, bool is_main) {
  std::set<std::string> produced;
  for (const auto& t : g.initializers) {
    CheckTensor(t);
    produced.insert(t.name);
  }
  for (const auto& in : g.inputs) {
    if (is_main && (!in.dtype || !in.shape)) __builtin_trap();
    produced.insert(in.name);
  }
  for (const auto& node : g.nodes) {
    for (const auto& in : node.inputs) {
      // A subgraph may read values of the graphs around it.
      if (is_main && !in.empty() && !produced.count(in)) __builtin_trap();
    }
    for (const auto& a : node.attributes) {
      if (a.kind == kiln::OnnxAttribute::Kind::kTensor) CheckTensor(*a.t);
      if (a.kind == kiln::OnnxAttribute::Kind::kGraph) CheckGraph(*a.g, false);
    }
    for (const auto& out : node.outputs) {
      if (!out.empty() && !produced.insert(out).second) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::OnnxReadOptions options;
  // Small limits, so that a few bytes cannot ask for gigabytes.
  options.limits.max_tensor_elements = 1 << 16;
  options.limits.max_nodes = 1 << 12;
  options.limits.max_graph_nesting = 4;
  options.limits.max_proto_items = 1 << 16;
  auto model = kiln::ParseOnnxModel(data, size, "", options);
  if (!model.ok()) {
    if (model.status().message().empty()) __builtin_trap();
    return 0;
  }
  // A model of other domains only need not import the default one.
  if (model->opset_imports.empty()) __builtin_trap();
  const bool imports_default = model->opset_imports.count("") != 0;
  if (imports_default &&
      (model->default_opset() < kiln::kOnnxMinOpset || model->default_opset() > kiln::kOnnxMaxOpset))
    __builtin_trap();
  CheckGraph(model->graph, true);
  return 0;
}
