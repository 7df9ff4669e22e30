#include "onnx/onnx_reader.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "onnx/onnx_graph_reader.h"
#include "onnx/onnx_proto.h"
#include "onnx/onnx_read_context.h"
#include "onnx/onnx_tensor_reader.h"

namespace kiln {
namespace {

// Messages nested deeper than this are refused while decoding (each level
// of subgraph is three messages deep: graph, node, attribute), so that no
// file can exhaust the stack.
constexpr int kMaxMessageDepth = 100;

Status ReadOpsetImports(const onnx_proto::Model& proto, std::map<std::string, int64_t>* imports) {
  // The format requires at least one: without it no node's meaning is known.
  if (proto.opset_import.empty()) return Corrupt("the model imports no operator set (opset_import is empty)");
  for (const onnx_proto::OperatorSetId& opset : proto.opset_import) {
    std::string domain = opset.domain == "ai.onnx" ? "" : opset.domain;
    if (!imports->emplace(domain, opset.version).second) {
      return Corrupt("the model imports the domain '{}' twice", opset.domain);
    }
  }
  // A model of other domains only (the training ops) need not import the
  // default one; a node of a domain the model does not import is refused
  // where it is read.
  auto it = imports->find("");
  if (it != imports->end() && (it->second < kOnnxMinOpset || it->second > kOnnxMaxOpset)) {
    return Unsupported("the model uses opset {} of the default domain; kiln reads opsets {} through {}",
                       it->second, kOnnxMinOpset, kOnnxMaxOpset);
  }
  return Status::Ok();
}

}  // namespace

Expected<OnnxModel> ParseOnnxModel(const void* data, size_t size, const std::string& base_dir,
                                   const OnnxReadOptions& options) {
  if (size > options.limits.max_file_bytes) {
    return ResourceExhausted(
        "the model is {} bytes, above the limit of {} (larger models keep their weights in "
        "external data files)",
        size, options.limits.max_file_bytes);
  }
  onnx_proto::Model proto;
  KILN_RETURN_IF_ERROR(onnx_proto::DecodeModel(static_cast<const uint8_t*>(data), size, kMaxMessageDepth,
                                               options.limits.max_proto_items, &proto));
  if (!proto.has_graph) return Corrupt("not an ONNX model: it has no graph");
  if (!proto.function_names.empty()) {
    return Unsupported("the model defines local functions ('{}'), which kiln does not read",
                       proto.function_names[0]);
  }

  OnnxModel model;
  model.ir_version = proto.ir_version;
  model.producer_name = proto.producer_name;
  model.producer_version = proto.producer_version;
  KILN_RETURN_IF_ERROR(ReadOpsetImports(proto, &model.opset_imports));

  OnnxReadContext ctx;
  ctx.options = &options;
  ctx.opset_imports = &model.opset_imports;
  ctx.base_dir = base_dir;
  KILN_ASSIGN_OR_RETURN(OnnxGraphRead read, ReadOnnxGraph(proto.graph, 0, &ctx));
  model.graph = std::move(read.graph);
  model.external_files = std::move(ctx.external_files);
  return model;
}

Expected<OnnxModel> ReadOnnxModel(const std::string& path, const OnnxReadOptions& options) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return IoError("{}: {}", path, ec.message());
  if (size > options.limits.max_file_bytes) {
    return ResourceExhausted(
        "{}: the model is {} bytes, above the limit of {} (larger models keep their weights "
        "in external data files)",
        path, size, options.limits.max_file_bytes);
  }
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Expected<OnnxModel> model = ParseOnnxModel(file->data(), file->size(), dir, options);
  if (!model.ok()) return model.status().WithContext(path);
  return model;
}

}  // namespace kiln

namespace kiln {

Expected<OnnxTensor> ReadOnnxTensorFile(const std::string& path, const OnnxLimits& limits) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return IoError("{}: {}", path, ec.message());
  if (size > limits.max_file_bytes) return ResourceExhausted("{}: {} bytes, above the limit", path, size);
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  onnx_proto::Tensor proto;
  Status decoded = onnx_proto::DecodeTensorProto(static_cast<const uint8_t*>(file->data()), file->size(),
                                                 limits.max_proto_items, &proto);
  if (!decoded.ok()) return decoded.WithContext(path);
  OnnxReadOptions options;
  options.limits = limits;
  OnnxReadContext ctx;
  ctx.options = &options;
  auto t = ReadOnnxTensor(proto, "tensor", &ctx);
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

}  // namespace kiln
