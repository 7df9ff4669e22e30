// Compiling an ONNX graph into an artifact, and opening one (onnx_artifact.h).
#include "onnx/onnx_artifact.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "compiler/artifact_compatibility.h"
#include "compiler/compiled_tensor_graph.h"
#include "core/cpu_info.h"
#include "core/mapped_file.h"
#include "format/artifact_file.h"
#include "onnx/onnx_reader.h"
#include "onnx/onnx_weight_split.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

// The external-data location under which the graph stored in an artifact
// names its weights section (no file is called that: it is not a path).
constexpr char kArtifactWeightsLocation[] = "@kiln.weights";

// The name and size of a file, and the xxh64 of its bytes.
nlohmann::json FileHash(const std::string& name, const MappedFile& file) {
  return nlohmann::json{{"name", name},
                        {"bytes", file.size()},
                        {"xxh64", fmt::format("{:016x}", ArtifactChecksum({file.data(), file.size()}))}};
}

// The .onnx file and its external data files, as `files` records them.
Expected<nlohmann::json> SourceFiles(const std::string& model, const std::set<std::string>& external) {
  nlohmann::json files = nlohmann::json::array();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> onnx, MappedFile::Open(model));
  files.push_back(FileHash(fs::path(model).filename().string(), *onnx));
  for (const std::string& location : external) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> data,
                          MappedFile::Open((fs::path(model).parent_path() / location).string()));
    files.push_back(FileHash(location, *data));
  }
  return files;
}

std::string ShapesText(const nlohmann::json& shapes) {
  std::string s;
  for (const auto& [name, dims] : shapes.items()) {
    s += fmt::format("{}{}:{}", s.empty() ? "" : " ", name, fmt::join(dims.get<std::vector<int64_t>>(), ","));
  }
  return s;
}

std::string RebuildHint(const std::string& path, const nlohmann::json& meta) {
  std::string source = meta.value(nlohmann::json::json_pointer("/source/path"), std::string());
  if (source.empty()) source = "MODEL.onnx";
  std::string shapes;
  if (meta.contains("input_shapes")) {
    for (const auto& [name, dims] : meta.at("input_shapes").items()) {
      const auto d = dims.get<std::vector<int64_t>>();
      if (std::find(d.begin(), d.end(), -1) == d.end()) {
        shapes += fmt::format(" --input-shape {}:{}", name, fmt::join(d, ","));
      }
    }
  }
  for (const nlohmann::json& f : meta.value("fixed_inputs", nlohmann::json::array())) {
    const std::string name = f.at("name").get<std::string>();
    shapes += fmt::format(" --input {}=VALUE.npy --fixed-input {}", name, name);
  }
  const std::string precision =
      meta.value(nlohmann::json::json_pointer("/options/--precision"), std::string("fp32"));
  if (precision != "fp32") shapes += " --precision " + precision;
  return fmt::format("rebuild it on this machine: kiln compile {}{} -o {}", source, shapes, path);
}

// The recorded options as OnnxSessionOptions (backend, precision, threads,
// input shapes).
Status RecordedOptions(const nlohmann::json& meta, OnnxSessionOptions* o) {
  const nlohmann::json& recorded = meta.at("options");
  o->backend = recorded.at("--backend").get<std::string>();
  KILN_ASSIGN_OR_RETURN(o->precision, ParsePrecision(recorded.at("--precision").get<std::string>()));
  o->threads = recorded.at("--threads").get<int>();
  o->fuse = recorded.at("fuse").get<bool>();
  // Inputs compiled with a dimension open (-1) are compiled per shape at run time.
  o->input_shapes.clear();
  for (const auto& [name, dims] : meta.at("input_shapes").items()) {
    auto d = dims.get<std::vector<int64_t>>();
    if (std::find(d.begin(), d.end(), -1) == d.end()) o->input_shapes[name] = std::move(d);
  }
  return Status::Ok();
}

// The products the precision policy multiplies in bf16 on the CPU (it does
// so only where the CPU multiplies bf16 natively).
int Bf16ProductsOnCpu(const CompiledTensorGraph& compiled) {
  const std::string cpu = BackendRegistry::Get().cpu().name();
  int n = 0;
  for (const Node& node : compiled.graph().nodes()) {
    if (node.dead || node.backend != cpu || !node.named_attrs.Has("compute_dtype")) continue;
    auto dtype = node.named_attrs.String("compute_dtype");
    n += dtype.ok() && *dtype == "bf16";
  }
  return n;
}

// Why the artifact at `path` is stale ("" when it is not): as any
// artifact (kernel-layout version, ISA), or compiled with products in bf16
// for a CPU that multiplies bf16 and loaded on one that does not, where the
// same options compile them in fp32: what it stores would go unused and its
// outputs would not be the compiled plan's.
Expected<std::string> OnnxArtifactStaleReason(const std::string& path, const nlohmann::json& meta) {
  KILN_ASSIGN_OR_RETURN(std::string stale, ArtifactStaleReason(path, meta));
  if (!stale.empty()) return stale;
  const int bf16 = meta.value("bf16_products", 0);
  if (bf16 > 0 && !BackendRegistry::Get().cpu().has_bf16_tensor_products()) {
    return fmt::format("compiled with {} products in bf16 (--precision {}) on a CPU that multiplied bf16 ({}); "
                       "this one does not (no AVX-512 BF16 or AMX, or KILN_ISA caps it), so it would compute "
                       "them in fp32",
                       bf16, meta.at("options").at("--precision").get<std::string>(),
                       meta.value(nlohmann::json::json_pointer("/cpu/model"), std::string("?")));
  }
  return std::string();
}

// The inputs fixed when the artifact was compiled (`--fixed-input`), whose
// values its graph holds as initializers.
std::vector<std::string> FixedWhenCompiled(const nlohmann::json& meta) {
  std::vector<std::string> names;
  for (const nlohmann::json& f : meta.value("fixed_inputs", nlohmann::json::array())) {
    names.push_back(f.at("name").get<std::string>());
  }
  return names;
}

// The graph stored in `file`, its external data read where the sections
// holding it are mapped.
Expected<OnnxModel> ReadStoredGraph(const std::shared_ptr<const ArtifactFile>& file, const nlohmann::json& meta,
                                    const std::string& path,
                                    const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  std::map<std::string, std::span<const uint8_t>> external;
  for (const nlohmann::json& e : meta.at("external_data")) {
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file->Require(e.at("section").get<std::string>()));
    external[e.at("location").get<std::string>()] = s->span();
  }
  OnnxReadOptions read;
  read.input_shapes = input_shapes;
  read.external_data_keeper = file;  // weights used where they are mapped
  read.external_data = [external, path](const std::string& location) -> Expected<std::span<const uint8_t>> {
    auto it = external.find(location);
    if (it == external.end()) return Corrupt("{}: external data file '{}' is not stored", path, location);
    return it->second;
  };
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* graph, file->Require("onnx.model"));
  auto model = ParseOnnxModel(graph->data, graph->bytes, "", read);
  if (!model.ok()) return model.status().WithContext(fmt::format("{}: the stored graph", path));
  return std::move(*model);
}

// The values of the inputs fixed when the artifact was compiled, copied out
// of its graph (to compile it again with them).
Expected<std::map<std::string, HostTensor>> StoredFixedInputs(const std::shared_ptr<const ArtifactFile>& file,
                                                              const nlohmann::json& meta, const std::string& path) {
  std::map<std::string, HostTensor> values;
  const std::vector<std::string> names = FixedWhenCompiled(meta);
  if (names.empty()) return values;
  KILN_ASSIGN_OR_RETURN(OnnxModel model, ReadStoredGraph(file, meta, path, {}));
  for (const std::string& name : names) {
    auto it = std::find_if(model.graph.initializers.begin(), model.graph.initializers.end(),
                           [&name](const OnnxTensor& t) { return t.name == name; });
    if (it == model.graph.initializers.end()) {
      return Corrupt("{}: fixed input {} has no value in the stored graph", path, name);
    }
    HostTensor t(TensorType{it->dtype, it->dims});
    if (t.bytes.size() != it->data.size()) {
      return Corrupt("{}: fixed input {}: {} bytes stored for {}", path, name, it->data.size(), t.type.ToString());
    }
    std::copy(it->data.data(), it->data.data() + it->data.size(), t.bytes.begin());
    values.emplace(name, std::move(t));
  }
  return values;
}

}  // namespace

Expected<OnnxArtifactSummary> CompileOnnxArtifact(const std::string& model, OnnxSessionOptions options,
                                                  const std::string& output, const OnnxInputShapes& sample_shapes,
                                                  const std::vector<OnnxInputShapes>& shape_buckets) {
  if (IsArtifactFile(model)) return InvalidArgument("{} is already a compiled artifact", model);
  auto laid_out = std::make_shared<LaidOutWeights>();
  options.laid_out = laid_out;
  KILN_ASSIGN_OR_RETURN(auto session, OnnxSession::Load(model, options));
  std::vector<TensorType> types;
  nlohmann::json shapes = nlohmann::json::object();
  // The inputs fixed here are no inputs of the artifact: its graph holds
  // their values.
  auto is_fixed = [&options](const OnnxTensorInfo& i) { return options.fixed_inputs.count(i.name) > 0; };
  auto describe = [](const std::vector<OnnxTensorInfo>& infos, auto keep) {
    nlohmann::json list = nlohmann::json::array();
    for (const OnnxTensorInfo& i : infos) {
      if (keep(i)) list.push_back({{"name", i.name}, {"dtype", DTypeName(i.dtype)}, {"dims", i.dims}});
    }
    return list;
  };
  auto all = [](const OnnxTensorInfo&) { return true; };
  // An input with a dimension left open (no --input-shape) keeps it open:
  // the graph is then compiled per input shape at run time, as the .onnx
  // file is, and nothing is compiled here.
  std::string open_input;
  for (const OnnxTensorInfo& i : session->inputs()) {
    for (int64_t d : i.dims) {
      if (d < 0 && open_input.empty()) open_input = fmt::format("{} [{}]", i.name, DimsToString(i.dims));
    }
    types.push_back(TensorType{i.dtype, i.dims});
    if (!is_fixed(i)) shapes[i.name] = i.dims;
  }
  for (const auto& [name, dims] : sample_shapes) {
    const auto& inputs = session->inputs();
    // (A structured binding is captured by name only from C++20 on.)
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&input = name](const OnnxTensorInfo& i) { return i.name == input; });
    if (it == inputs.end()) return InvalidArgument("--sample-shape {}: the model has no input of that name", name);
    if (std::find(it->dims.begin(), it->dims.end(), -1) == it->dims.end()) {
      return InvalidArgument("--sample-shape {}: the input's shape [{}] is fixed; it is compiled at that shape",
                             name, DimsToString(it->dims));
    }
    types[static_cast<size_t>(it - inputs.begin())].dims = dims;
  }
  CompiledTensorGraph* compiled = nullptr;
  CompiledTensorGraph* sample = nullptr;  // a graph with open inputs, at --sample-shape
  if (open_input.empty()) {
    KILN_ASSIGN_OR_RETURN(compiled, session->Compiled(types));
  } else if (!sample_shapes.empty()) {
    auto at_sample = session->Compiled(types);
    if (!at_sample.ok()) return at_sample.status().WithContext("compiling at --sample-shape");
    sample = *at_sample;
  }
  const std::string isa = compiled != nullptr ? compiled->report().isa : GetCpuInfo().BestIsa();

  nlohmann::json meta = ArtifactProvenance(options.backend, isa);
  meta["kind"] = "onnx";
  KILN_ASSIGN_OR_RETURN(nlohmann::json files, SourceFiles(model, session->model().external_files));
  meta["source"] = {{"path", fs::absolute(model).string()}, {"format", "onnx"}, {"files", files}};
  meta["options"] = {{"--backend", options.backend},
                     {"--precision", PrecisionName(options.precision)},
                     {"--threads", options.threads},
                     {"fuse", options.fuse}};
  nlohmann::json fixed_names = nlohmann::json::array();
  for (const auto& [name, value] : options.fixed_inputs) fixed_names.push_back(name);
  if (!fixed_names.empty()) meta["options"]["--fixed-input"] = fixed_names;
  meta["input_shapes"] = shapes;
  meta["sample_shapes"] = sample_shapes;
  meta["shape_buckets"] = shape_buckets;
  meta["inputs"] = describe(session->inputs(), [&](const OnnxTensorInfo& i) { return !is_fixed(i); });
  meta["fixed_inputs"] = describe(session->inputs(), is_fixed);
  meta["outputs"] = describe(session->outputs(), all);
  // Their bf16 layouts are stored; a CPU without bf16 products finds the
  // file stale.
  meta["bf16_products"] = compiled != nullptr ? Bf16ProductsOnCpu(*compiled)
                          : sample != nullptr ? Bf16ProductsOnCpu(*sample)
                                              : 0;
  meta["compile_seconds"] = compiled != nullptr ? compiled->report().compile_seconds
                           : sample != nullptr ? sample->report().compile_seconds
                                               : 0.0;

  ArtifactWriter writer;
  const std::string per_shape = fmt::format(
      "compiled per input shape at run time: input {} has a dimension left open (--input-shape fixes it)\n",
      open_input);
  auto plan = [&](bool per_node) {
    if (compiled != nullptr) return TensorPlanText(*compiled, per_node);
    if (sample == nullptr) return per_shape;
    return per_shape + "the plan at --sample-shape, whose convolutions' layouts are stored:\n" +
           TensorPlanText(*sample, per_node);
  };
  KILN_RETURN_IF_ERROR(writer.AddText("plan", plan(false)));
  KILN_RETURN_IF_ERROR(writer.AddText("plan.nodes", plan(true)));
  // The kernels' layouts first (every load reads them), then the graph.
  nlohmann::json stored = nlohmann::json::array();
  std::vector<std::pair<std::string, std::span<const uint8_t>>> sections;
  for (const LaidOutWeights::Entry& e : laid_out->Recorded()) {
    const std::string section = fmt::format("w.{}", stored.size());
    stored.push_back({{"node", e.node}, {"layout", e.layout}, {"section", section}, {"bytes", e.bytes.size()}});
    sections.emplace_back(section, e.bytes);
  }
  meta["laid_out"] = std::move(stored);
  // The graph apart from its weights: the weights, each at a 64-byte
  // boundary, are mapped at load and used where they lie; the graph, small
  // now, is checked at every load.
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> onnx, MappedFile::Open(model));
  std::map<std::string, std::unique_ptr<MappedFile>> external_files;
  for (const std::string& location : session->model().external_files) {
    KILN_ASSIGN_OR_RETURN(external_files[location],
                          MappedFile::Open((fs::path(model).parent_path() / location).string()));
  }
  auto file_bytes = [&](const std::string& location) -> Expected<std::span<const uint8_t>> {
    auto it = external_files.find(location);
    if (it == external_files.end()) return NotFound("external data file '{}' was not read", location);
    return std::span<const uint8_t>(it->second->data(), it->second->size());
  };
  // A fixed input's value becomes an initializer of the stored graph, so
  // that loading folds it as this compile did.
  std::map<std::string, OnnxInputValue> fixed_values;
  for (const auto& [name, value] : options.fixed_inputs) {
    fixed_values[name] = OnnxInputValue{value.type.dtype, value.type.dims, {value.bytes.data(), value.bytes.size()}};
  }
  KILN_ASSIGN_OR_RETURN(SplitOnnxModel split, SplitOnnxWeights({onnx->data(), onnx->size()}, kArtifactWeightsLocation,
                                                               file_bytes, fixed_values));
  // The weights at a 64-byte aligned address, so that reading the graph
  // back leaves each initializer where it lies in them, as a load leaves
  // it in the mapped section: the compiled graph's constants are then
  // found in the section by their address.
  auto weights_copy = std::make_shared<std::vector<uint8_t>>(split.weights.size() + kOnnxWeightAlignment);
  uint8_t* weights_base = weights_copy->data() + (kOnnxWeightAlignment - reinterpret_cast<uintptr_t>(weights_copy->data()) %
                                                                           kOnnxWeightAlignment) % kOnnxWeightAlignment;
  std::copy(split.weights.begin(), split.weights.end(), weights_base);
  const std::span<const uint8_t> weights(weights_base, split.weights.size());
  // Read the graph back as loading will: it must parse, and whichever
  // external files it still names (tensors other than the main graph's
  // initializers) are stored whole.
  OnnxReadOptions check;
  check.input_shapes = options.input_shapes;
  for (const auto& [name, value] : options.fixed_inputs) check.input_shapes.erase(name);
  check.external_data = [&](const std::string& location) -> Expected<std::span<const uint8_t>> {
    if (location == kArtifactWeightsLocation) return weights;
    return file_bytes(location);
  };
  check.external_data_keeper = weights_copy;
  auto reread = ParseOnnxModel(split.graph.data(), split.graph.size(), "", check);
  if (!reread.ok()) return reread.status().WithContext("the graph without its weights");
  const std::set<std::string> still_external = reread->external_files;
  nlohmann::json external_sections = nlohmann::json::array();
  external_sections.push_back({{"location", kArtifactWeightsLocation}, {"section", "onnx.w"}});
  std::vector<const MappedFile*> external;
  for (const std::string& location : still_external) {
    if (location == kArtifactWeightsLocation) continue;
    const std::string section = fmt::format("onnx.x.{}", external.size());
    external_sections.push_back({{"location", location}, {"section", section}});
    external.push_back(external_files.at(location).get());
  }
  meta["external_data"] = std::move(external_sections);
  meta["weights_moved"] = split.moved;
  // The graph compiled as a load would compile it (from the graph read
  // back, its fixed inputs constants of it), kept after the stages with
  // its plan: a load binds it and runs no stage. Its constants are
  // referred to where they lie in onnx.w; those the stages made (folded
  // batch norms, say) are stored in onnx.c. An input left open is compiled
  // at its --sample-shape, which a run at that shape then binds (other
  // shapes compile from the graph).
  std::vector<std::pair<std::string, std::vector<uint8_t>>> stored_compilations;  // section, bytes
  std::string made_constants;
  std::vector<OnnxInputShapes> shape_sets;
  if (open_input.empty() || sample != nullptr) shape_sets.push_back(sample_shapes);
  if (!open_input.empty()) shape_sets.insert(shape_sets.end(), shape_buckets.begin(), shape_buckets.end());
  if (!shape_sets.empty()) {
    OnnxArtifact as_loaded;
    as_loaded.model = std::move(*reread);
    as_loaded.options = options;
    as_loaded.options.fixed_inputs.clear();
    for (const auto& [name, value] : options.fixed_inputs) as_loaded.options.fixed_when_compiled.push_back(name);
    as_loaded.options.input_shapes = check.input_shapes;
    as_loaded.options.keep_compilation = true;
    KILN_ASSIGN_OR_RETURN(auto again, OnnxSession::FromArtifact(std::move(as_loaded), model));
    // Constants the stages made, stored once however many graphs use them.
    std::map<std::pair<size_t, uint64_t>, uint64_t> made_by_content;
    LocateConstant locate = [&](const TensorData& c) -> Expected<std::optional<ConstantPlacement>> {
      const auto at = reinterpret_cast<uintptr_t>(c.data());
      const auto base = reinterpret_cast<uintptr_t>(weights_base);
      if (c.bytes() > 0 && at >= base && at + c.bytes() <= base + weights.size()) {
        return std::optional<ConstantPlacement>(ConstantPlacement{"onnx.w", static_cast<uint64_t>(at - base)});
      }
      if (c.bytes() < kOnnxMinMovedBytes) return std::optional<ConstantPlacement>();
      const std::pair<size_t, uint64_t> content(c.bytes(), ArtifactChecksum({c.data(), c.bytes()}));
      auto it = made_by_content.find(content);
      if (it != made_by_content.end() && std::equal(c.data(), c.data() + c.bytes(),
                                                    reinterpret_cast<const uint8_t*>(made_constants.data()) + it->second)) {
        return std::optional<ConstantPlacement>(ConstantPlacement{"onnx.c", it->second});
      }
      made_constants.resize((made_constants.size() + kOnnxWeightAlignment - 1) / kOnnxWeightAlignment *
                            kOnnxWeightAlignment);
      const uint64_t offset = made_constants.size();
      made_constants.append(reinterpret_cast<const char*>(c.data()), c.bytes());
      made_by_content.emplace(content, offset);
      return std::optional<ConstantPlacement>(ConstantPlacement{"onnx.c", offset});
    };
    nlohmann::json entries = nlohmann::json::array();
    for (const OnnxInputShapes& shapes : shape_sets) {
      std::vector<TensorType> loaded_types;
      for (const OnnxTensorInfo& i : again->inputs()) {
        auto given = shapes.find(i.name);
        loaded_types.push_back(TensorType{i.dtype, given != shapes.end() ? given->second : i.dims});
      }
      auto as_compiled = again->Compiled(loaded_types);
      if (!as_compiled.ok()) {
        return as_compiled.status().WithContext(fmt::format("compiling at {}", ShapesText(nlohmann::json(shapes))));
      }
      if (!(*as_compiled)->kept()) return Internal("the compiled graph was not kept");
      StoredCompilation keep = *(*as_compiled)->kept();
      keep.key = TensorCompilationKey(loaded_types, again->options());
      const std::string section =
          stored_compilations.empty() ? "compiled" : fmt::format("compiled.{}", stored_compilations.size());
      KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodeTensorCompilation(keep, locate));
      stored_compilations.emplace_back(section, std::move(bytes));
      entries.push_back({{"section", section}, {"key", keep.key}});
    }
    meta["compiled"] = std::move(entries);
    meta["compiled_constants_bytes"] = made_constants.size();
  }
  KILN_RETURN_IF_ERROR(writer.AddText("metadata", meta.dump(1)));
  for (const auto& [section, bytes] : sections) KILN_RETURN_IF_ERROR(writer.Add(section, bytes));
  KILN_RETURN_IF_ERROR(writer.Add("onnx.w", weights));
  // The graph is checked at every load, as a plan is.
  KILN_RETURN_IF_ERROR(writer.Add(
      "onnx.model", {reinterpret_cast<const uint8_t*>(split.graph.data()), split.graph.size()}, kVerifyAtOpen));
  for (size_t i = 0; i < external.size(); ++i) {
    KILN_RETURN_IF_ERROR(writer.Add(fmt::format("onnx.x.{}", i), {external[i]->data(), external[i]->size()}));
  }
  for (const auto& [section, bytes] : stored_compilations) {
    KILN_RETURN_IF_ERROR(writer.Add(section, bytes, kVerifyAtOpen));
  }
  if (!stored_compilations.empty()) {
    KILN_RETURN_IF_ERROR(writer.Add(
        "onnx.c", {reinterpret_cast<const uint8_t*>(made_constants.data()), made_constants.size()}));
  }
  KILN_RETURN_IF_ERROR(writer.Write(output));

  OnnxArtifactSummary summary;
  summary.laid_out = static_cast<int64_t>(sections.size());
  std::error_code ec;
  summary.bytes = static_cast<int64_t>(fs::file_size(output, ec));
  const CompiledTensorGraph* ran = compiled != nullptr ? compiled : sample;
  summary.compile_seconds = ran != nullptr ? ran->report().compile_seconds : 0.0;
  summary.input_shapes = ShapesText(shapes);
  return summary;
}

bool IsOnnxArtifact(const std::string& path) { return ArtifactHasSection(path, "onnx.model"); }

Expected<OnnxArtifact> OpenOnnxArtifact(const std::string& path, const OnnxSessionOptions& given) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> opened, ArtifactFile::Open(path));
  return OpenOnnxArtifactIn(std::move(opened), path, given);
}

Expected<OnnxArtifact> OpenOnnxArtifactIn(std::shared_ptr<const ArtifactFile> file, const std::string& path,
                                          const OnnxSessionOptions& given) {
  OnnxArtifact a;
  a.file = std::move(file);
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* meta, a.file->Require("metadata"));
  try {
    a.metadata = nlohmann::json::parse(meta->text());
    if (a.metadata.value("kind", std::string()) != "onnx") {
      return InvalidArgument("{} holds a compiled language model, not an ONNX graph: load it with -m "
                             "(kiln generate, serve, bench)",
                             path);
    }
    if (given.recompile_if_stale) {
      KILN_ASSIGN_OR_RETURN(std::string stale, OnnxArtifactStaleReason(path, a.metadata));
      if (!stale.empty()) {
        a = OnnxArtifact();  // unmapped before the file is replaced
        KILN_ASSIGN_OR_RETURN(std::string rebuilt, RecompileStaleOnnxArtifact(path));
        fmt::print(stderr, "note: {}\n", rebuilt);
        OnnxSessionOptions again = given;
        again.recompile_if_stale = false;
        return OpenOnnxArtifact(path, again);
      }
    }
    KILN_RETURN_IF_ERROR(CheckArtifactRuns(path, a.metadata, RebuildHint(path, a.metadata), &a.note));
    KILN_ASSIGN_OR_RETURN(std::string stale, OnnxArtifactStaleReason(path, a.metadata));
    if (!stale.empty()) {
      return Unsupported("{}: stale artifact: {}; {} (or load it with --recompile-if-stale)", path, stale,
                         RebuildHint(path, a.metadata));
    }
    if (given.verify_weights) KILN_RETURN_IF_ERROR(a.file->VerifyAll());
    const std::vector<std::string> fixed = FixedWhenCompiled(a.metadata);
    auto fixed_when_compiled = [&fixed](const std::string& name) {
      return std::find(fixed.begin(), fixed.end(), name) != fixed.end();
    };
    for (const auto& [name, value] : given.fixed_inputs) {
      if (fixed_when_compiled(name)) {
        return InvalidArgument("--fixed-input {}: {} was fixed when the artifact {} was compiled, and its value is "
                               "stored in it; leave out --fixed-input {} and --input {}",
                               name, name, path, name, name);
      }
      return InvalidArgument("--fixed-input {}: an input of an artifact is fixed when it is compiled (kiln compile "
                             "--input {}=FILE --fixed-input {}), not when it runs",
                             name, name, name);
    }
    a.options = given;
    a.options.fixed_when_compiled = fixed;
    KILN_RETURN_IF_ERROR(RecordedOptions(a.metadata, &a.options));
    a.options.threads = given.threads;  // the pool's size only: the kernels are the same
    // Unfused (kiln diff, for every intermediate): the convolutions keep
    // their names and weights, so their stored layouts still apply.
    a.options.fuse = a.options.fuse && given.fuse;
    const OnnxSessionOptions defaults;
    if (given.backend != defaults.backend && given.backend != a.options.backend) {
      return InvalidArgument("--backend {}: the artifact was compiled with --backend {}; leave the flag out, or "
                             "compile another artifact with it",
                             given.backend, a.options.backend);
    }
    if (given.precision != defaults.precision && given.precision != a.options.precision) {
      return InvalidArgument("--precision {}: the artifact was compiled with --precision {}; leave the flag out, "
                             "or compile another artifact with it",
                             PrecisionName(given.precision), PrecisionName(a.options.precision));
    }
    for (const auto& [name, dims] : given.input_shapes) {
      if (fixed_when_compiled(name)) {
        return InvalidArgument("--input-shape {}: {} was fixed when the artifact was compiled; its value and shape "
                               "are stored in it",
                               name, name);
      }
      if (!a.metadata.at("input_shapes").contains(name)) {
        return InvalidArgument("--input-shape {}: the artifact has no input of that name (it was compiled for {})",
                               name, ShapesText(a.metadata.at("input_shapes")));
      }
      const auto compiled = a.metadata.at("input_shapes").at(name).get<std::vector<int64_t>>();
      bool agrees = compiled.size() == dims.size();
      for (size_t d = 0; agrees && d < dims.size(); ++d) agrees = compiled[d] < 0 || compiled[d] == dims[d];
      if (!agrees) {
        return InvalidArgument(
            "--input-shape {}:{}: the artifact was compiled for {}:{}; leave the flag out, or compile another "
            "artifact with that shape",
            name, fmt::join(dims, ","), name, fmt::join(compiled, ","));
      }
      a.options.input_shapes[name] = dims;  // fixes a dimension left open
    }
    auto store = std::make_shared<LaidOutWeights>();
    for (const nlohmann::json& e : a.metadata.at("laid_out")) {
      KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, a.file->Require(e.at("section").get<std::string>()));
      if (s->bytes != e.at("bytes").get<uint64_t>()) {
        return Corrupt("{}: section {} holds {} bytes, the metadata says {}", path, s->name, s->bytes,
                       e.at("bytes").get<uint64_t>());
      }
      store->AddStored(e.at("node").get<std::string>(), e.at("layout").get<std::string>(), s->span());
    }
    store->Keep(a.file);
    a.options.laid_out = std::move(store);
    // The stored compiled graph, bound when a session's input types and
    // options are those it was compiled for (KILN_ARTIFACT_PLANS=recompile
    // runs the stages anyway, to measure what storing them saves).
    const char* plans_env = std::getenv("KILN_ARTIFACT_PLANS");
    const bool recompile = plans_env != nullptr && std::string(plans_env) == "recompile";
    if (a.metadata.contains("compiled") && !recompile) {
      std::map<std::string, const ArtifactSection*> by_key;
      for (const nlohmann::json& c : a.metadata.at("compiled")) {
        KILN_ASSIGN_OR_RETURN(const ArtifactSection* graph, a.file->Require(c.at("section").get<std::string>()));
        by_key[c.at("key").get<std::string>()] = graph;
      }
      std::shared_ptr<const ArtifactFile> file = a.file;
      a.options.stored_compilation = [file, by_key,
                                      path](const std::string& wanted) -> Expected<std::optional<StoredCompilation>> {
        auto found = by_key.find(wanted);
        if (found == by_key.end()) return std::optional<StoredCompilation>();
        const ArtifactSection* graph = found->second;
        std::map<std::string, int32_t> domain_ids;
        for (Backend* b : BackendRegistry::Get().All()) domain_ids[b->domain().name()] = b->domain().id();
        ResolveConstant resolve = [file, path](const std::string& section, uint64_t offset,
                                               uint64_t bytes) -> Expected<SharedBytes> {
          if (section != "onnx.w" && section != "onnx.c") {
            return Corrupt("{}: a constant stored in section {}, which holds none", path, section);
          }
          KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file->Require(section));
          if (offset > s->bytes || bytes > s->bytes - offset) {
            return Corrupt("{}: a constant of {} bytes at offset {} lies outside section {} of {} bytes", path,
                           bytes, offset, section, s->bytes);
          }
          return SharedBytes(file, s->data + offset, static_cast<size_t>(bytes));
        };
        auto decoded = DecodeTensorCompilation(graph->span(), domain_ids, resolve);
        if (!decoded.ok()) return decoded.status().WithContext(fmt::format("{}: the stored compiled graph", path));
        return std::optional<StoredCompilation>(std::move(decoded).value());
      };
    }
    KILN_ASSIGN_OR_RETURN(a.model, ReadStoredGraph(a.file, a.metadata, path, a.options.input_shapes));
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  return a;
}

Expected<std::string> RecompileStaleOnnxArtifact(const std::string& path) {
  OnnxSessionOptions options;
  std::map<std::string, std::vector<int64_t>> sample_shapes;
  std::vector<OnnxInputShapes> shape_buckets;
  std::string stale, source;
  nlohmann::json recorded_files;
  {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> opened, ArtifactFile::Open(path));
    const std::shared_ptr<const ArtifactFile> file = std::move(opened);
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* section, file->Require("metadata"));
    try {
      const nlohmann::json meta = nlohmann::json::parse(section->text());
      KILN_ASSIGN_OR_RETURN(stale, OnnxArtifactStaleReason(path, meta));
      if (stale.empty()) return InvalidArgument("{}: not stale, nothing to rebuild", path);
      KILN_RETURN_IF_ERROR(RecordedOptions(meta, &options));
      // The fixed inputs' values are the stored graph's: the rebuild folds
      // the same ones (copied, as the file is replaced).
      KILN_ASSIGN_OR_RETURN(options.fixed_inputs, StoredFixedInputs(file, meta, path));
      if (meta.contains("sample_shapes")) {
        sample_shapes = meta.at("sample_shapes").get<std::map<std::string, std::vector<int64_t>>>();
      }
      if (meta.contains("shape_buckets")) shape_buckets = meta.at("shape_buckets").get<std::vector<OnnxInputShapes>>();
      source = meta.at("source").at("path").get<std::string>();
      recorded_files = meta.at("source").at("files");
    } catch (const nlohmann::json::exception& e) {
      return Corrupt("{}: metadata: {}", path, e.what());
    }
  }
  std::error_code ec;
  if (source.empty() || !fs::exists(source, ec)) {
    return NotFound("{}: stale artifact ({}), and its source {} is gone: compile it again from the model "
                    "(kiln compile MODEL.onnx -o {})",
                    path, stale, source.empty() ? "(none recorded)" : source, path);
  }
  const auto start = std::chrono::steady_clock::now();
  auto summary = CompileOnnxArtifact(source, options, path, sample_shapes, shape_buckets);
  if (!summary.ok()) {
    return summary.status().WithContext(fmt::format("rebuilding stale artifact {} from {}", path, source));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool changed = true;
  auto reopened = ArtifactFile::Open(path);
  if (reopened.ok()) {
    if (const ArtifactSection* m = (*reopened)->Find("metadata")) {
      auto meta = nlohmann::json::parse(m->text(), nullptr, false);
      changed = !meta.is_object() || meta.value(nlohmann::json::json_pointer("/source/files"), nlohmann::json()) !=
                                         recorded_files;
    }
  }
  return fmt::format("{} was stale ({}); rebuilt from {} in {:.2f} s{}", path, stale, source, seconds,
                     changed ? "; the source's files changed since it was first compiled, so it holds their "
                               "current contents"
                             : "");
}

}  // namespace kiln
