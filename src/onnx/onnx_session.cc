// Loading, compiling per input shape, and running ONNX models.
#include "onnx/onnx_session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/compiled_tensor_graph.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"
#include "format/artifact_file.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_import.h"
#include "onnx/onnx_reader.h"

namespace kiln {

struct OnnxSession::Impl {
  OnnxModel model;
  OnnxSessionOptions options;
  std::vector<OnnxTensorInfo> inputs, outputs;
  std::map<std::vector<TensorType>, std::unique_ptr<CompiledTensorGraph>> compiled;
  std::unique_ptr<ThreadPool> pool;
  std::map<std::string, TensorData> fixed;
  std::string name;  // the file's path, in the shared arena's accounting
};

OnnxSession::OnnxSession() : impl_(std::make_unique<Impl>()) {}
OnnxSession::~OnnxSession() = default;

std::string TensorCompilationKey(const std::vector<TensorType>& inputs, const OnnxSessionOptions& options) {
  std::vector<std::string> types;
  for (const TensorType& t : inputs) types.push_back(t.ToString());
  // The ISA: layouts and kernels are chosen for it (a file compiled for a
  // lower one runs the stages again).
  return fmt::format("tensor graph; inputs {}; backend {}; precision {}; fuse {}; isa {}", fmt::join(types, ", "),
                     options.backend, PrecisionName(options.precision), options.fuse ? 1 : 0,
                     GetCpuInfo().BestIsa());
}

namespace {

OnnxTensorInfo InfoOf(const OnnxValueInfo& v) {
  OnnxTensorInfo info;
  info.name = v.name;
  info.dtype = v.dtype.value_or(DType::kF32);
  if (v.shape) {
    for (const OnnxDim& d : *v.shape) info.dims.push_back(d.is_static() ? *d.value : -1);
  }
  return info;
}

}  // namespace

Expected<std::unique_ptr<OnnxSession>> OnnxSession::Load(const std::string& path, const OnnxSessionOptions& options) {
  if (IsArtifactFile(path)) {
    KILN_ASSIGN_OR_RETURN(OnnxArtifact artifact, OpenOnnxArtifact(path, options));
    return FromArtifact(std::move(artifact), path);
  }
  auto s = std::unique_ptr<OnnxSession>(new OnnxSession());
  Impl& m = *s->impl_;
  OnnxReadOptions read;
  read.input_shapes = options.input_shapes;
  KILN_ASSIGN_OR_RETURN(m.model, ReadOnnxModel(path, read));
  m.options = options;
  return Prepare(std::move(s), path);
}

Expected<std::unique_ptr<OnnxSession>> OnnxSession::FromArtifact(OnnxArtifact artifact, const std::string& name) {
  if (!artifact.note.empty()) fmt::print(stderr, "note: {}\n", artifact.note);
  auto s = std::unique_ptr<OnnxSession>(new OnnxSession());
  s->impl_->model = std::move(artifact.model);
  s->impl_->options = std::move(artifact.options);
  return Prepare(std::move(s), name);
}

Expected<std::unique_ptr<OnnxSession>> OnnxSession::Prepare(std::unique_ptr<OnnxSession> s, const std::string& path) {
  Impl& m = *s->impl_;
  m.name = path;
  for (const OnnxValueInfo& v : m.model.graph.inputs) {
    if (!v.dtype) return InvalidArgument("{}: input {} has no element type", path, v.name);
    m.inputs.push_back(InfoOf(v));
    auto f = m.options.fixed_inputs.find(v.name);
    if (f != m.options.fixed_inputs.end()) {
      const HostTensor& h = f->second;
      // A value of another dtype would be read as the input's type.
      if (h.type.dtype != m.inputs.back().dtype) {
        return InvalidArgument("fixed input {}: dtype {} given, the model's is {}", v.name, DTypeName(h.type.dtype),
                               DTypeName(m.inputs.back().dtype));
      }
      if (h.bytes.size() != h.type.Bytes()) return InvalidArgument("fixed input {}: {} bytes for {}", v.name, h.bytes.size(), h.type.ToString());
      m.fixed[v.name] = TensorData(h.type, std::make_shared<const std::string>(h.bytes.begin(), h.bytes.end()));
      m.inputs.back().dims = h.type.dims;
    }
  }
  for (const auto& [name, t] : m.options.fixed_inputs) {
    if (!m.fixed.count(name)) return InvalidArgument("fixed input {}: the model has no input of that name", name);
  }
  for (const OnnxValueInfo& v : m.model.graph.outputs) m.outputs.push_back(InfoOf(v));
  // kiln's kernels and oneDNN's convolutions take turns in a vision graph:
  // one team of threads for both (ThreadPoolOptions::share_openmp_team).
  // KILN_OPENMP_TEAM=0 gives kiln's kernels their own workers instead.
  const char* team = std::getenv("KILN_OPENMP_TEAM");
  m.pool = std::make_unique<ThreadPool>(
      m.options.threads, ThreadPoolOptions{.share_openmp_team = team == nullptr || std::string(team) != "0"});
  // Inputs whose every dimension is known: compile now, so a bad graph
  // fails at load.
  std::vector<TensorType> types;
  bool all_static = true;
  for (const OnnxTensorInfo& i : m.inputs) {
    for (int64_t d : i.dims) all_static = all_static && d >= 0;
    types.push_back(TensorType{i.dtype, i.dims});
  }
  if (all_static) KILN_RETURN_IF_ERROR(s->Compiled(types).status());
  return s;
}

const std::vector<OnnxTensorInfo>& OnnxSession::inputs() const { return impl_->inputs; }
const std::vector<OnnxTensorInfo>& OnnxSession::outputs() const { return impl_->outputs; }

Expected<CompiledTensorGraph*> OnnxSession::Compiled(const std::vector<TensorType>& types) {
  Impl& m = *impl_;
  if (types.size() != m.inputs.size()) {
    return InvalidArgument("the model takes {} inputs, {} given", m.inputs.size(), types.size());
  }
  for (size_t i = 0; i < types.size(); ++i) {
    const OnnxTensorInfo& info = m.inputs[i];
    if (types[i].dtype != info.dtype) {
      return InvalidArgument("input {}: dtype {} given, the model takes {}", info.name, DTypeName(types[i].dtype),
                             DTypeName(info.dtype));
    }
    bool fits = types[i].dims.size() == info.dims.size();
    for (size_t d = 0; fits && d < info.dims.size(); ++d) {
      fits = types[i].dims[d] >= 0 && (info.dims[d] < 0 || info.dims[d] == types[i].dims[d]);
    }
    if (!fits) {
      return InvalidArgument("input {}: shape [{}] given, the model takes [{}] (-1: any size)", info.name,
                             DimsToString(types[i].dims), DimsToString(info.dims));
    }
  }
  auto it = m.compiled.find(types);
  if (it != m.compiled.end()) return it->second.get();
  TensorCompileOptions options;
  options.backend = m.options.backend;
  options.precision = m.options.precision;
  options.threads = m.pool->num_threads();
  options.fuse = m.options.fuse;
  options.laid_out = m.options.laid_out;
  options.shared_arenas = m.options.shared_arenas;
  std::vector<std::string> shapes;
  for (const TensorType& t : types) shapes.push_back(DimsToString(t.dims));
  options.arena_user = fmt::format("{} [{}]", m.name, fmt::join(shapes, "; "));
  options.keep_compilation = m.options.keep_compilation;
  std::unique_ptr<CompiledTensorGraph> compiled;
  // An artifact's graph for these types and options: bound, nothing compiled.
  if (m.options.stored_compilation) {
    KILN_ASSIGN_OR_RETURN(std::optional<StoredCompilation> stored,
                          m.options.stored_compilation(TensorCompilationKey(types, m.options)));
    if (stored) {
      auto bound = CompiledTensorGraph::FromStored(std::move(*stored), options);
      if (!bound.ok()) return bound.status().WithContext(m.name);
      compiled = std::move(bound).value();
    }
  }
  if (compiled == nullptr) {
    KILN_ASSIGN_OR_RETURN(OnnxImport imported, ImportOnnxGraph(m.model, types, m.fixed));
    KILN_ASSIGN_OR_RETURN(compiled, CompiledTensorGraph::Compile(std::move(imported.graph), imported.inputs,
                                                                 imported.outputs, options,
                                                                 std::move(imported.folded)));
  }
  CompiledTensorGraph* raw = compiled.get();
  m.compiled.emplace(types, std::move(compiled));
  return raw;
}

Expected<std::vector<TensorType>> OnnxSession::OutputTypes(const std::vector<TensorType>& inputs) {
  KILN_ASSIGN_OR_RETURN(CompiledTensorGraph * c, Compiled(inputs));
  return c->output_types();
}

Status OnnxSession::Run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs) {
  std::vector<TensorType> types;
  std::vector<const void*> in;
  for (const TensorRef& r : inputs) {
    types.push_back(r.type);
    in.push_back(r.data);
  }
  KILN_ASSIGN_OR_RETURN(CompiledTensorGraph * c, Compiled(types));
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto f = impl_->fixed.find(impl_->inputs[i].name);
    // An empty fixed input has nothing to compare (and may have no address).
    if (f != impl_->fixed.end() && f->second.bytes() > 0 &&
        (inputs[i].data == nullptr || std::memcmp(f->second.data(), inputs[i].data, f->second.bytes()) != 0)) {
      return InvalidArgument("input {}: its value was fixed at compile time; this run passes another",
                             impl_->inputs[i].name);
    }
  }
  const std::vector<TensorType> want = c->output_types();
  if (outputs.size() != want.size()) {
    return InvalidArgument("the model has {} outputs, {} buffers given", want.size(), outputs.size());
  }
  std::vector<void*> out;
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (outputs[j].type != want[j]) {
      return InvalidArgument("output {}: buffer of {} given, the output is {}", impl_->outputs[j].name,
                             outputs[j].type.ToString(), want[j].ToString());
    }
    out.push_back(outputs[j].data);
  }
  return c->Run(in, out, impl_->pool.get());
}

ThreadPool* OnnxSession::pool() { return impl_->pool.get(); }
const OnnxModel& OnnxSession::model() const { return impl_->model; }
const OnnxSessionOptions& OnnxSession::options() const { return impl_->options; }

Status OnnxSession::RefuseInputFixedWhenCompiled(const std::string& name) const {
  const std::vector<std::string>& fixed = impl_->options.fixed_when_compiled;
  if (std::find(fixed.begin(), fixed.end(), name) == fixed.end()) return Status::Ok();
  return InvalidArgument(
      "input {}: its value was fixed when the artifact was compiled (--fixed-input {}) and is stored in it; "
      "pass no value for it",
      name, name);
}

Expected<std::vector<HostTensor>> OnnxSession::Run(const std::map<std::string, HostTensor>& inputs) {
  std::vector<TensorRef> refs;
  for (const OnnxTensorInfo& info : impl_->inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) return InvalidArgument("input {} is missing", info.name);
    if (it->second.bytes.size() != it->second.type.Bytes()) {
      return InvalidArgument("input {}: {} bytes for {}", info.name, it->second.bytes.size(), it->second.type.ToString());
    }
    refs.push_back(TensorRef{it->second.type, const_cast<uint8_t*>(it->second.bytes.data())});
  }
  for (const auto& [name, t] : inputs) {
    KILN_RETURN_IF_ERROR(RefuseInputFixedWhenCompiled(name));
    bool known = false;
    for (const OnnxTensorInfo& info : impl_->inputs) known = known || info.name == name;
    if (!known) return InvalidArgument("the model has no input named {}", name);
  }
  std::vector<TensorType> types;
  for (const TensorRef& r : refs) types.push_back(r.type);
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> out_types, OutputTypes(types));
  std::vector<HostTensor> outputs;
  std::vector<TensorRef> out_refs;
  for (const TensorType& t : out_types) outputs.emplace_back(t);
  for (HostTensor& h : outputs) out_refs.push_back(h.ref());
  KILN_RETURN_IF_ERROR(Run(refs, out_refs));
  return outputs;
}

}  // namespace kiln
