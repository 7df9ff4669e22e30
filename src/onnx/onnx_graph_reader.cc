#include "onnx/onnx_graph_reader.h"

#include <fmt/format.h>

#include <set>
#include <unordered_set>

#include "onnx/onnx_tensor_reader.h"

namespace kiln {
namespace {

// The domains whose ops kiln knows of; a node of another domain is refused.
const std::set<std::string>& KnownDomains() {
  static const std::set<std::string> domains = {"", "ai.onnx.ml", "com.microsoft"};
  return domains;
}

std::string NormalizeDomain(const std::string& domain) {
  return domain == "ai.onnx" ? "" : domain;
}

std::string ShapeText(const std::vector<OnnxDim>& shape) {
  std::vector<std::string> dims;
  for (const OnnxDim& d : shape) {
    dims.push_back(d.value ? std::to_string(*d.value) : d.symbol.empty() ? "?" : d.symbol);
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

Expected<OnnxValueInfo> ReadValueInfo(const onnx_proto::ValueInfo& proto, const std::string& what) {
  using Type = onnx_proto::Type;
  OnnxValueInfo info;
  info.name = proto.name;
  if (!proto.has_type || proto.type.kind == Type::kNotSet) return info;
  const Type& type = proto.type;
  if (type.kind != Type::kTensor) {
    const char* kind = type.kind == Type::kSequence   ? "a sequence"
                       : type.kind == Type::kMap      ? "a map"
                       : type.kind == Type::kOptional ? "an optional"
                                                      : "a sparse tensor";
    return Unsupported("{} is {}; kiln reads tensors only", what, kind);
  }
  if (type.elem_type != onnx_proto::kUndefined) {
    info.dtype = DTypeFromOnnx(type.elem_type);
    if (!info.dtype) {
      return Unsupported("{} has element type {}, which kiln does not read", what,
                         OnnxTypeName(type.elem_type));
    }
  }
  if (type.has_shape) {
    std::vector<OnnxDim> shape;
    for (const onnx_proto::Dimension& d : type.shape) {
      OnnxDim dim;
      if (d.has_dim_value) {
        if (d.dim_value < 0) return Corrupt("{} has a negative dimension {}", what, d.dim_value);
        dim.value = d.dim_value;
      } else if (d.has_dim_param) {
        dim.symbol = d.dim_param;
      }
      shape.push_back(std::move(dim));
    }
    info.shape = std::move(shape);
  }
  return info;
}

// Replaces the declared shape of a model input by its --input-shape, which
// must agree with the dimensions the model fixes.
Status ApplyInputShape(const std::vector<int64_t>& dims, OnnxValueInfo* input) {
  if (input->shape) {
    const std::vector<OnnxDim>& declared = *input->shape;
    if (declared.size() != dims.size()) {
      return InvalidArgument(
          "input shape for '{}' has {} dimensions, but the model declares {} dimensions {}", input->name,
          dims.size(), declared.size(), ShapeText(declared));
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      if (declared[i].value && *declared[i].value != dims[i]) {
        return InvalidArgument(
            "input shape for '{}' gives dimension {} as {}, but the model fixes it at {} in {}", input->name,
            i, dims[i], *declared[i].value, ShapeText(declared));
      }
    }
  }
  std::vector<OnnxDim> shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) shape[i].value = dims[i];
  input->shape = std::move(shape);
  return Status::Ok();
}

Expected<OnnxAttribute::Kind> AttributeKind(const onnx_proto::Attribute& a, const std::string& what) {
  using namespace onnx_proto;
  static const char* const kTypeNames[] = {
      "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",         "GRAPH",      "FLOATS",     "INTS",
      "STRINGS",   "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  switch (a.type) {
    case kAttrFloat: return OnnxAttribute::Kind::kFloat;
    case kAttrInt: return OnnxAttribute::Kind::kInt;
    case kAttrString: return OnnxAttribute::Kind::kString;
    case kAttrTensor: return OnnxAttribute::Kind::kTensor;
    case kAttrGraph: return OnnxAttribute::Kind::kGraph;
    case kAttrFloats: return OnnxAttribute::Kind::kFloats;
    case kAttrInts: return OnnxAttribute::Kind::kInts;
    case kAttrStrings: return OnnxAttribute::Kind::kStrings;
    case kAttrUndefined:
      // Files from before the type field: the kind is the field that is set.
      if (a.t) return OnnxAttribute::Kind::kTensor;
      if (a.g) return OnnxAttribute::Kind::kGraph;
      if (!a.floats.empty()) return OnnxAttribute::Kind::kFloats;
      if (!a.ints.empty()) return OnnxAttribute::Kind::kInts;
      if (!a.strings.empty()) return OnnxAttribute::Kind::kStrings;
      if (a.has_s) return OnnxAttribute::Kind::kString;
      if (a.has_f) return OnnxAttribute::Kind::kFloat;
      if (a.has_i) return OnnxAttribute::Kind::kInt;
      if (a.other_values > 0) return Unsupported("{} holds a kind of value kiln does not read", what);
      return Corrupt("{} has no type and no value", what);
    default:
      if (a.type > 0 && a.type < static_cast<int32_t>(std::size(kTypeNames))) {
        return Unsupported("{} is of type {}, which kiln does not read", what, kTypeNames[a.type]);
      }
      return Corrupt("{} has the unknown type {}", what, a.type);
  }
}

Status ReadAttribute(const onnx_proto::Attribute& proto, const std::string& what, int depth,
                     OnnxReadContext* ctx, OnnxAttribute* attr,
                     std::vector<OnnxFreeValue>* subgraph_free_values) {
  if (!proto.ref_attr_name.empty()) {
    return Unsupported("{} refers to a function attribute, which kiln does not read", what);
  }
  attr->name = proto.name;
  KILN_ASSIGN_OR_RETURN(attr->kind, AttributeKind(proto, what));
  switch (attr->kind) {
    case OnnxAttribute::Kind::kFloat: attr->f = proto.f; break;
    case OnnxAttribute::Kind::kInt: attr->i = proto.i; break;
    case OnnxAttribute::Kind::kString: attr->s = proto.s; break;
    case OnnxAttribute::Kind::kFloats: attr->floats = proto.floats; break;
    case OnnxAttribute::Kind::kInts: attr->ints = proto.ints; break;
    case OnnxAttribute::Kind::kStrings: attr->strings = proto.strings; break;
    case OnnxAttribute::Kind::kTensor: {
      if (!proto.t) return Corrupt("{} is of type TENSOR but holds no tensor", what);
      KILN_ASSIGN_OR_RETURN(OnnxTensor t, ReadOnnxTensor(*proto.t, what, ctx));
      attr->t = std::make_shared<const OnnxTensor>(std::move(t));
      break;
    }
    case OnnxAttribute::Kind::kGraph: {
      if (!proto.g) return Corrupt("{} is of type GRAPH but holds no graph", what);
      if (depth + 1 > ctx->options->limits.max_graph_nesting) {
        return ResourceExhausted("{}: subgraphs nest deeper than {} levels, the limit", what,
                                 ctx->options->limits.max_graph_nesting);
      }
      Expected<OnnxGraphRead> sub = ReadOnnxGraph(*proto.g, depth + 1, ctx);
      if (!sub.ok()) return sub.status().WithContext(what);
      attr->g = std::make_shared<const OnnxGraph>(std::move(sub->graph));
      for (OnnxFreeValue& v : sub->free_values) subgraph_free_values->push_back(std::move(v));
      break;
    }
  }
  return Status::Ok();
}

Status ReadNode(const onnx_proto::Node& proto, size_t index, int depth, OnnxReadContext* ctx, OnnxNode* node,
                std::vector<OnnxFreeValue>* subgraph_free_values) {
  if (++ctx->nodes > ctx->options->limits.max_nodes) {
    return ResourceExhausted("the model has more than {} nodes, the limit", ctx->options->limits.max_nodes);
  }
  node->op_type = proto.op_type;
  node->name = proto.name.empty() ? fmt::format("{}_{}", node->op_type, index) : proto.name;
  if (node->op_type.empty()) return Corrupt("node '{}' (number {}) has no op_type", node->name, index);
  const std::string what = DescribeOnnxNode(*node);
  node->domain = NormalizeDomain(proto.domain);
  if (!ctx->opset_imports->count(node->domain)) {
    return Corrupt("{} is from the domain '{}', which the model does not import", what, proto.domain);
  }
  if (!KnownDomains().count(node->domain)) {
    return Unsupported(
        "{} is from the domain '{}', which kiln does not know (it knows ai.onnx, ai.onnx.ml and "
        "com.microsoft)",
        what, proto.domain);
  }
  node->inputs = proto.input;
  node->outputs = proto.output;
  std::unordered_set<std::string> attr_names;
  for (const onnx_proto::Attribute& a : proto.attribute) {
    if (a.name.empty()) return Corrupt("{} has an attribute without a name", what);
    if (!attr_names.insert(a.name).second) return Corrupt("{} has the attribute '{}' twice", what, a.name);
    OnnxAttribute attr;
    std::vector<OnnxFreeValue> free;
    KILN_RETURN_IF_ERROR(
        ReadAttribute(a, fmt::format("{} attribute '{}'", what, a.name), depth, ctx, &attr, &free));
    for (OnnxFreeValue& v : free) {
      if (v.where.empty()) v.where = fmt::format(" in the subgraph '{}' of {}", a.name, what);
      subgraph_free_values->push_back(std::move(v));
    }
    node->attributes.push_back(std::move(attr));
  }
  return Status::Ok();
}

}  // namespace

Expected<OnnxGraphRead> ReadOnnxGraph(const onnx_proto::Graph& proto, int depth, OnnxReadContext* ctx) {
  const bool is_main = depth == 0;
  OnnxGraphRead read;
  OnnxGraph& graph = read.graph;
  graph.name = proto.name;

  if (proto.sparse_initializer_count > 0) {
    return Unsupported("the graph '{}' has sparse initializers, which kiln does not read", proto.name);
  }
  std::unordered_set<std::string> initializer_names;
  for (const onnx_proto::Tensor& t : proto.initializer) {
    if (t.name.empty()) return Corrupt("initializer number {} has no name", graph.initializers.size());
    KILN_ASSIGN_OR_RETURN(OnnxTensor tensor, ReadOnnxTensor(t, fmt::format("initializer '{}'", t.name), ctx));
    initializer_names.insert(tensor.name);
    graph.initializers.push_back(std::move(tensor));
  }

  const auto& overrides = ctx->options->input_shapes;
  for (const onnx_proto::ValueInfo& vi : proto.input) {
    if (vi.name.empty()) return Corrupt("graph input number {} has no name", graph.inputs.size());
    if (initializer_names.count(vi.name)) continue;  // an initializer listed as an input too
    const std::string what = fmt::format("graph input '{}'", vi.name);
    KILN_ASSIGN_OR_RETURN(OnnxValueInfo input, ReadValueInfo(vi, what));
    if (is_main) {
      auto it = overrides.find(input.name);
      if (it != overrides.end()) KILN_RETURN_IF_ERROR(ApplyInputShape(it->second, &input));
      if (!input.dtype) return Corrupt("{} declares no element type", what);
      if (!input.shape)
        return InvalidArgument("{} has no shape; give it one with --input-shape {}:DIMS", what, vi.name);
    }
    graph.inputs.push_back(std::move(input));
  }
  if (is_main) {
    for (const auto& [name, dims] : overrides) {
      bool found = false;
      for (const OnnxValueInfo& in : graph.inputs) found = found || in.name == name;
      if (!found) {
        std::vector<std::string> names;
        for (const OnnxValueInfo& in : graph.inputs) names.push_back(in.name);
        return InvalidArgument(
            "input shape given for '{}', which is not an input of the model (its inputs: {})", name,
            fmt::join(names, ", "));
      }
    }
  }
  for (const onnx_proto::ValueInfo& vi : proto.output) {
    if (vi.name.empty()) return Corrupt("graph output number {} has no name", graph.outputs.size());
    KILN_ASSIGN_OR_RETURN(OnnxValueInfo output, ReadValueInfo(vi, fmt::format("graph output '{}'", vi.name)));
    graph.outputs.push_back(std::move(output));
  }

  std::vector<std::vector<std::string>> implicit_inputs;
  graph.nodes.resize(proto.node.size());
  implicit_inputs.resize(proto.node.size());
  for (size_t i = 0; i < proto.node.size(); ++i) {
    std::vector<OnnxFreeValue> free;
    KILN_RETURN_IF_ERROR(ReadNode(proto.node[i], i, depth, ctx, &graph.nodes[i], &free));
    for (OnnxFreeValue& v : free) {
      implicit_inputs[i].push_back(v.name);
      read.free_values.push_back(std::move(v));
    }
  }

  // Values the subgraphs take from outside that this graph produces are
  // resolved here; OrderOnnxGraph reports what is left.
  std::vector<OnnxFreeValue> subgraph_free = std::move(read.free_values);
  read.free_values.clear();
  std::vector<OnnxFreeValue> own_free;
  KILN_RETURN_IF_ERROR(OrderOnnxGraph(&graph, implicit_inputs, &own_free));
  std::unordered_set<std::string> unresolved;
  for (const OnnxFreeValue& v : own_free) unresolved.insert(v.name);
  // The first user of a free value is the more telling one when it is inside a subgraph.
  for (OnnxFreeValue& v : subgraph_free) {
    if (unresolved.erase(v.name)) read.free_values.push_back(std::move(v));
  }
  for (OnnxFreeValue& v : own_free) {
    if (unresolved.erase(v.name)) read.free_values.push_back(std::move(v));
  }

  if (is_main && !read.free_values.empty()) return MissingOnnxValue(read.free_values.front());
  return read;
}

}  // namespace kiln
