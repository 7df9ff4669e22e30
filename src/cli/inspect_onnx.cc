#include "cli/inspect_onnx.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cli/engine_flags.h"
#include "compiler/compiled_tensor_graph.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_input_shape.h"
#include "onnx/onnx_reader.h"
#include "onnx/onnx_session.h"

namespace kiln::cli {
namespace {

std::string ShapeText(const OnnxValueInfo& v) {
  if (!v.shape) return "shape unknown";
  std::vector<std::string> dims;
  for (const OnnxDim& d : *v.shape)
    dims.push_back(d.value ? std::to_string(*d.value) : d.symbol.empty() ? "?" : d.symbol);
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

std::string ValueText(const OnnxValueInfo& v) {
  return fmt::format("{}: {} {}", v.name, v.dtype ? DTypeName(*v.dtype) : "type unknown", ShapeText(v));
}

struct GraphTotals {
  std::map<std::string, int> op_counts;  // "Conv", "com.microsoft.FusedConv"
  int nodes = 0;
  int subgraph_nodes = 0;
  int64_t initializers = 0;
  uint64_t initializer_bytes = 0;
  std::map<std::string, int> initializer_types;
};

void Count(const OnnxGraph& g, bool is_subgraph, GraphTotals* totals) {
  for (const OnnxTensor& t : g.initializers) {
    ++totals->initializers;
    totals->initializer_bytes += t.data.size();
    ++totals->initializer_types[DTypeName(t.dtype)];
  }
  for (const OnnxNode& n : g.nodes) {
    ++totals->nodes;
    if (is_subgraph) ++totals->subgraph_nodes;
    ++totals->op_counts[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
    for (const OnnxAttribute& a : n.attributes) {
      if (a.kind == OnnxAttribute::Kind::kGraph) Count(*a.g, true, totals);
    }
  }
}

std::string CountsText(const std::map<std::string, int>& counts) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : counts) parts.push_back(fmt::format("{} {}", name, count));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

bool IsOnnxPath(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".onnx";
}

bool IsOnnxModelPath(const std::string& path) { return IsOnnxPath(path) || IsOnnxArtifact(path); }

Status PrintOnnxSummary(const std::string& path, const std::vector<std::string>& input_shapes) {
  OnnxReadOptions options;
  for (const std::string& s : input_shapes) KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &options.input_shapes));
  KILN_ASSIGN_OR_RETURN(OnnxModel model, ReadOnnxModel(path, options));
  fmt::print("model: {}\n", path);
  fmt::print("format: onnx (IR version {})\n", model.ir_version);
  if (!model.producer_name.empty()) {
    fmt::print("producer: {} {}\n", model.producer_name, model.producer_version);
  }
  std::vector<std::string> opsets;
  for (const auto& [domain, version] : model.opset_imports) {
    opsets.push_back(fmt::format("{} {}", domain.empty() ? "ai.onnx" : domain, version));
  }
  fmt::print("opsets: {}\n", fmt::join(opsets, ", "));
  fmt::print("inputs:\n");
  for (const OnnxValueInfo& v : model.graph.inputs) fmt::print("  {}\n", ValueText(v));
  fmt::print("outputs:\n");
  for (const OnnxValueInfo& v : model.graph.outputs) fmt::print("  {}\n", ValueText(v));
  GraphTotals totals;
  Count(model.graph, false, &totals);
  fmt::print("nodes: {}{}\n", totals.nodes,
             totals.subgraph_nodes > 0 ? fmt::format(" ({} in subgraphs)", totals.subgraph_nodes) : "");
  fmt::print("op types: {}\n", CountsText(totals.op_counts));
  fmt::print("initializers: {} tensors, {} bytes ({})\n", totals.initializers, totals.initializer_bytes,
             CountsText(totals.initializer_types));
  return Status::Ok();
}

Status PrintOnnxPlan(const std::string& path, const std::vector<std::string>& input_shapes,
                     const std::string& backend, int threads, bool nodes, const std::string& precision) {
  OnnxSessionOptions options;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(precision, Precision::kFp32));
  for (const std::string& s : input_shapes) KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &options.input_shapes));
  options.backend = backend;
  options.threads = threads;
  KILN_ASSIGN_OR_RETURN(auto session, OnnxSession::Load(path, options));
  std::vector<TensorType> types;
  for (const OnnxTensorInfo& i : session->inputs()) {
    for (int64_t d : i.dims) {
      if (d < 0) {
        return InvalidArgument("input {} has shape [{}]: fix it with --input-shape {}:DIMS to compile", i.name,
                               DimsToString(i.dims), i.name);
      }
    }
    types.push_back(TensorType{i.dtype, i.dims});
  }
  KILN_ASSIGN_OR_RETURN(CompiledTensorGraph * compiled, session->Compiled(types));
  fmt::print("\n{}", TensorPlanText(*compiled, nodes));
  return Status::Ok();
}

}  // namespace kiln::cli
