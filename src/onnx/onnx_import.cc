// The ONNX importer.
#include "onnx/onnx_import.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "graph/tensor_op.h"

namespace kiln {
namespace {

TensorData DataOf(const OnnxTensor& t) {
  return TensorData(TensorType{t.dtype, t.dims}, t.data);  // shared, not copied
}

// Ops whose result must not be folded even when their inputs are constants:
// the dequantization of int8 weights is kept, so the compiler can run the
// matmul or convolution after it in int8.
bool KeepUnfolded(const std::string& op_type) {
  return op_type == "DequantizeLinear" || op_type == "RandomNormal" || op_type == "RandomUniform" ||
         op_type == "RandomNormalLike" || op_type == "RandomUniformLike" || op_type == "Multinomial" ||
         op_type == "Bernoulli";
}

// A Constant node's value.
Expected<TensorData> ConstantValue(const OnnxNode& node) {
  if (node.attributes.size() != 1) {
    return InvalidArgument("Constant {}: expects exactly one value attribute, has {}", node.name,
                           node.attributes.size());
  }
  const OnnxAttribute& a = node.attributes[0];
  if (a.name == "value" && a.kind == OnnxAttribute::Kind::kTensor && a.t) return DataOf(*a.t);
  if (a.name == "value_float" && a.kind == OnnxAttribute::Kind::kFloat) {
    return TensorData::FromValues<float>(DType::kF32, {}, {a.f});
  }
  if (a.name == "value_floats" && a.kind == OnnxAttribute::Kind::kFloats) {
    return TensorData::FromValues<float>(DType::kF32, {static_cast<int64_t>(a.floats.size())}, a.floats);
  }
  if (a.name == "value_int" && a.kind == OnnxAttribute::Kind::kInt) {
    return TensorData::FromValues<int64_t>(DType::kI64, {}, {a.i});
  }
  if (a.name == "value_ints" && a.kind == OnnxAttribute::Kind::kInts) {
    return TensorData::FromValues<int64_t>(DType::kI64, {static_cast<int64_t>(a.ints.size())}, a.ints);
  }
  return Unsupported("Constant {}: value attribute '{}' ({}) is not supported", node.name, a.name,
                     OnnxAttributeKindName(a.kind));
}

// ONNX attributes as kiln's named attributes.
Expected<AttributeMap> ConvertAttributes(const OnnxNode& node) {
  AttributeMap m;
  for (const OnnxAttribute& a : node.attributes) {
    switch (a.kind) {
      case OnnxAttribute::Kind::kFloat: m.SetFloat(a.name, static_cast<double>(a.f)); break;
      case OnnxAttribute::Kind::kInt: m.SetInt(a.name, a.i); break;
      case OnnxAttribute::Kind::kString: m.SetString(a.name, a.s); break;
      case OnnxAttribute::Kind::kInts: m.SetInts(a.name, a.ints); break;
      case OnnxAttribute::Kind::kFloats:
        m.SetFloats(a.name, std::vector<double>(a.floats.begin(), a.floats.end()));
        break;
      case OnnxAttribute::Kind::kTensor: {
        // A one-element tensor attribute (ConstantOfShape's value) becomes
        // its value and dtype.
        if (!a.t || a.t->element_count() != 1) {
          return Unsupported("{} {}: tensor attribute '{}' with other than one element is not supported",
                             node.op_type, node.name, a.name);
        }
        auto v = DataOf(*a.t).ToDoubles();
        if (!v.ok()) return Unsupported("{} {}: attribute '{}': {}", node.op_type, node.name, a.name, v.status().message());
        m.SetFloat(a.name, (*v)[0]);
        m.SetInt(a.name + "_dtype", static_cast<int64_t>(a.t->dtype));
        break;
      }
      case OnnxAttribute::Kind::kGraph:
        return Unsupported("{} {}: control flow (subgraph attribute '{}') is not supported; kiln compiles static "
                           "graphs",
                           node.op_type, node.name, a.name);
      case OnnxAttribute::Kind::kStrings:
        return Unsupported("{} {}: string-list attribute '{}' is not supported", node.op_type, node.name, a.name);
    }
  }
  return m;
}

}  // namespace

Expected<OnnxImport> ImportOnnxGraph(const OnnxModel& model, const std::vector<TensorType>& input_types,
                                     const std::map<std::string, TensorData>& fixed) {
  const OnnxGraph& og = model.graph;
  if (input_types.size() != og.inputs.size()) {
    return InvalidArgument("the model has {} inputs, {} types given", og.inputs.size(), input_types.size());
  }
  const int opset = static_cast<int>(model.default_opset());
  OnnxImport out;
  Graph& g = out.graph;
  std::map<std::string, ValueId> values;

  for (size_t i = 0; i < og.inputs.size(); ++i) {
    ValueId v = g.AddTensorValue(og.inputs[i].name, input_types[i]);
    g.value(v).is_graph_input = true;
    g.value(v).io_slot = static_cast<int32_t>(i);
    out.inputs.push_back(v);
    auto f = fixed.find(og.inputs[i].name);
    if (f != fixed.end()) {
      if (f->second.type() != input_types[i]) {
        return InvalidArgument("input {}: fixed value of {} for an input of {}", og.inputs[i].name,
                               f->second.type().ToString(), input_types[i].ToString());
      }
      values[og.inputs[i].name] = g.AddConstant(og.inputs[i].name + ".fixed", f->second);
    } else {
      values[og.inputs[i].name] = v;
    }
  }
  for (const OnnxTensor& t : og.initializers) {
    if (values.count(t.name)) continue;  // a graph input of that name overrides its default
    if (ElementBytes(t.dtype) == 0) return Unsupported("initializer {}: dtype {} is not supported", t.name, DTypeName(t.dtype));
    values[t.name] = g.AddConstant(t.name, DataOf(t));
  }

  out.nodes_in_model = static_cast<int>(og.nodes.size());
  for (const OnnxNode& node : og.nodes) {
    if (!node.domain.empty()) {
      return Unsupported("node {} ({}): domain '{}' is not supported; kiln runs the default ONNX domain", node.name,
                         node.op_type, node.domain);
    }
    if (node.op_type == "Constant") {
      KILN_ASSIGN_OR_RETURN(TensorData data, ConstantValue(node));
      if (node.outputs.empty() || node.outputs[0].empty()) continue;
      values[node.outputs[0]] = g.AddConstant(node.outputs[0], std::move(data));
      continue;
    }
    if (FindTensorOp(node.op_type) == nullptr) {
      return Unsupported("node {}: op {} is not one kiln runs (see `kiln backends` for the ops each backend runs)",
                         node.name, node.op_type);
    }
    KILN_ASSIGN_OR_RETURN(AttributeMap attrs, ConvertAttributes(node));

    std::vector<ValueId> inputs;
    std::vector<TensorType> types(node.inputs.size());
    ShapeContext ctx;
    ctx.op_type = node.op_type;
    ctx.node = node.name;
    ctx.attrs = &attrs;
    ctx.opset = opset;
    bool all_constant = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].empty()) {
        inputs.push_back(kNoValue);
        ctx.inputs.push_back({});
        continue;
      }
      auto it = values.find(node.inputs[i]);
      if (it == values.end()) return InvalidArgument("node {} ({}): input '{}' has no producer", node.name, node.op_type, node.inputs[i]);
      inputs.push_back(it->second);
      const Value& v = g.value(it->second);
      types[i] = v.tensor_type();
      ctx.inputs.push_back({&types[i], v.constant.get()});
      if (!v.constant) all_constant = false;
    }
    int num_outputs = static_cast<int>(node.outputs.size());
    while (num_outputs > 0 && node.outputs[static_cast<size_t>(num_outputs - 1)].empty()) --num_outputs;
    ctx.num_outputs = std::max(num_outputs, 1);
    KILN_ASSIGN_OR_RETURN(ShapeResult shapes, InferTensorOp(ctx));

    // Outputs known at compile time: from shape inference (Shape, Size) or
    // by running the node on its constant inputs.
    std::vector<std::optional<TensorData>> known = shapes.constants;
    bool all_known = std::all_of(known.begin(), known.end(), [](const auto& k) { return k.has_value(); });
    size_t out_bytes = 0;
    for (const TensorType& t : shapes.outputs) out_bytes += t.Bytes();
    if (!all_known && all_constant && !inputs.empty() && !KeepUnfolded(node.op_type) && out_bytes <= kMaxFoldedBytes) {
      cpu::TensorOpRun run;
      run.op_type = node.op_type;
      run.node = node.name;
      run.attrs = attrs;
      run.num_outputs = ctx.num_outputs;
      run.opset = opset;
      run.inputs_are_constants = true;
      for (ValueId v : inputs) {
        if (v == kNoValue) {
          run.inputs.emplace_back();
        } else {
          run.inputs.emplace_back(*g.value(v).constant);
        }
      }
      auto folded = cpu::RunTensorOp(run);
      // A node the CPU cannot run at compile time stays a node (and is
      // placed, or refused, like any other).
      if (folded.ok()) {
        for (size_t i = 0; i < folded->size(); ++i) known[i] = std::move((*folded)[i]);
        all_known = true;
      } else if (folded.status().code() != StatusCode::kUnsupported) {
        return folded.status();
      }
    }
    if (all_known) {
      for (int i = 0; i < num_outputs; ++i) {
        const std::string& name = node.outputs[static_cast<size_t>(i)];
        if (!name.empty()) values[name] = g.AddConstant(name, std::move(*known[static_cast<size_t>(i)]));
      }
      out.folded.push_back(fmt::format("{} {}: folded to {}", node.op_type, node.name,
                                       shapes.outputs.empty() ? "nothing" : shapes.outputs[0].ToString()));
      continue;
    }

    Node n;
    n.op = OpKind::kTensorOp;
    n.op_type = node.op_type;
    n.opset = opset;
    n.name = node.name;
    n.named_attrs = std::move(attrs);
    n.inputs = std::move(inputs);
    for (int i = 0; i < ctx.num_outputs; ++i) {
      std::string name = i < num_outputs ? node.outputs[static_cast<size_t>(i)] : "";
      if (name.empty()) name = fmt::format("{}:unused{}", node.name, i);
      ValueId v = g.AddTensorValue(name, shapes.outputs[static_cast<size_t>(i)]);
      n.outputs.push_back(v);
      values[name] = v;
    }
    g.AddNode(std::move(n));
  }

  // Graph outputs: written to the caller's memory. One that is not the
  // result of a node of its own (an input, a constant, an output twice)
  // gets a copy.
  std::set<ValueId> taken;
  for (size_t j = 0; j < og.outputs.size(); ++j) {
    const std::string& name = og.outputs[j].name;
    auto it = values.find(name);
    if (it == values.end()) return InvalidArgument("graph output '{}' has no producer", name);
    ValueId v = it->second;
    if (g.value(v).is_preset() || g.value(v).is_output || taken.count(v)) {
      Node copy;
      copy.op = OpKind::kTensorOp;
      copy.op_type = "Identity";
      copy.name = fmt::format("output_copy.{}", name);
      copy.inputs = {v};
      ValueId c = g.AddTensorValue(name, g.value(v).tensor_type());
      copy.outputs = {c};
      g.AddNode(std::move(copy));
      v = c;
    }
    taken.insert(v);
    g.value(v).is_output = true;
    g.value(v).io_slot = static_cast<int32_t>(og.inputs.size() + j);
    out.outputs.push_back(v);
  }

  // Nodes nothing reads (and that write no graph output) are dropped.
  std::vector<bool> needed(g.values().size(), false);
  for (ValueId v : out.outputs) needed[static_cast<size_t>(v)] = true;
  for (auto n = g.nodes().rbegin(); n != g.nodes().rend(); ++n) {
    bool used = std::any_of(n->outputs.begin(), n->outputs.end(), [&](ValueId o) { return needed[static_cast<size_t>(o)]; });
    if (!used) {
      n->dead = true;
      continue;
    }
    for (ValueId in : n->inputs) {
      if (in != kNoValue) needed[static_cast<size_t>(in)] = true;
    }
  }
  KILN_RETURN_IF_ERROR(g.Compact());
  return out;
}

}  // namespace kiln
