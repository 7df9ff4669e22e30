#include "vision/pipeline_artifact.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/artifact_compatibility.h"
#include "compiler/shared_arenas.h"
#include "core/mapped_file.h"
#include "core/precision.h"
#include "format/artifact_file.h"
#include "onnx/onnx_artifact.h"
#include "onnx/onnx_reader.h"
#include "vision/ocr_preprocess.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

// Removes the models' own artifacts, written beside the output, whatever
// happens.
struct TemporaryFiles {
  std::vector<std::string> paths;
  ~TemporaryFiles() {
    std::error_code ec;
    for (const std::string& p : paths) fs::remove(p, ec);
  }
};

// The sample shapes of a model's open inputs: the shape its pipeline stage
// gives, open dimensions at 320 (a multiple of 32, and a recognizer width
// bucket). None when the model's input is fixed or the stage's shape unknown.
Expected<std::map<std::string, std::vector<int64_t>>> SampleShapes(const PipelineSpec& spec, const std::string& name,
                                                                   const std::string& path) {
  std::map<std::string, std::vector<int64_t>> samples;
  KILN_ASSIGN_OR_RETURN(OnnxModel model, ReadOnnxModel(path));
  const auto& inputs = model.graph.inputs;
  for (const auto& input : inputs) {
    if (!input.shape) continue;
    bool open = false;
    for (const OnnxDim& d : *input.shape) open = open || !d.is_static();
    if (!open) continue;
    for (const PipelineStage& s : spec.stages) {
      if (s.kind != "model" || s.model != name) continue;
      // A stage of one "input" feeds a model of one input.
      const std::string port = s.named_inputs ? input.name : inputs.size() == 1 ? "input" : "";
      if (!s.inputs.count(port) || s.input_outputs.count(port)) continue;
      const PipelineStage* from = FindPipelineStage(spec, s.inputs.at(port));
      if (from == nullptr || from->shape.empty()) continue;
      std::vector<int64_t> dims = from->shape;
      for (int64_t& d : dims) d = d < 0 ? 320 : d;
      samples[input.name] = dims;
      break;
    }
  }
  return samples;
}

// The further shapes a text recognizer fed by an ocr_rec_input stage is
// compiled at: each width bucket the stage makes (320, 640, ... up to its
// max_width) beyond the sample's 320, so that every crop runs a stored
// graph. None for other models.
std::vector<OnnxInputShapes> ShapeBuckets(const PipelineSpec& spec, const std::string& name,
                                          const OnnxInputShapes& samples) {
  std::vector<OnnxInputShapes> buckets;
  if (samples.size() != 1) return buckets;
  const auto& [input, sample] = *samples.begin();
  for (const PipelineStage& s : spec.stages) {
    if (s.kind != "model" || s.model != name) continue;
    const std::string port = s.named_inputs ? input : "input";
    if (!s.inputs.count(port)) continue;
    const PipelineStage* from = FindPipelineStage(spec, s.inputs.at(port));
    if (from == nullptr || from->kind != "ocr_rec_input" || from->shape.empty() || from->shape.back() >= 0) continue;
    const int max_width = from->params.value("max_width", 3200);
    const int top = std::max(kRecBucketStep, max_width / kRecBucketStep * kRecBucketStep);
    for (int width = 2 * kRecBucketStep; width <= top; width += kRecBucketStep) {
      std::vector<int64_t> dims = sample;
      dims.back() = width;
      buckets.push_back({{input, dims}});
    }
    break;
  }
  return buckets;
}

std::string Hash(std::string_view bytes) {
  return fmt::format("{:016x}",
                     ArtifactChecksum({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

// The largest arena need a model's compile added to the shared arenas'
// accounting (its graphs are the users that were not there before).
size_t LargestNewNeed(const std::map<std::string, size_t>& before, const std::map<std::string, size_t>& after) {
  size_t largest = 0;
  for (const auto& [user, need] : after) {
    if (!before.count(user)) largest = std::max(largest, need);
  }
  return largest;
}

// The artifact inside section `entry` of a pipeline artifact, parsed in
// place (the pipeline's mapping must outlive it).
Expected<std::unique_ptr<ArtifactFile>> StoredModel(const ArtifactFile& file, const nlohmann::json& entry,
                                                    const std::string& label) {
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* section, file.Require(entry.at("section").get<std::string>()));
  return ArtifactFile::Parse(section->data, section->bytes, label);
}

// Why a pipeline artifact cannot run on this build and CPU: the first model
// whose stored artifact is stale, with the reason; "" when none is.
Expected<std::string> PipelineStaleReason(const ArtifactFile& file, const nlohmann::json& meta,
                                          const std::string& path) {
  for (const auto& [name, entry] : meta.at("models").items()) {
    const std::string label = fmt::format("{} model '{}'", path, name);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> model, StoredModel(file, entry, label));
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* model_meta, model->Require("metadata"));
    KILN_ASSIGN_OR_RETURN(std::string stale, ArtifactStaleReason(label, nlohmann::json::parse(model_meta->text())));
    if (!stale.empty()) return fmt::format("model '{}' {}", name, stale);
  }
  return std::string();
}

// A recorded file that must be as it was compiled: present, with the same
// xxh64. `what` names it in messages.
Status CheckRecordedFile(const std::string& path, const std::string& file, const std::string& xxh64,
                         const std::string& stale, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    return NotFound("{}: stale artifact ({}), and {} {} is gone: compile the pipeline again (kiln compile "
                    "PIPELINE -o {})",
                    path, stale, what, file, path);
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(file));
  if (Hash(bytes) != xxh64) {
    return InvalidArgument("{}: stale artifact ({}), and {} {} changed since it was compiled (xxh64 {}, now {}): "
                           "compile the pipeline again (kiln compile PIPELINE -o {})",
                           path, stale, what, file, xxh64, Hash(bytes), path);
  }
  return Status::Ok();
}

// Rebuilds the stale pipeline artifact at `path` from the pipeline file and
// model files it records, which must be unchanged, with the backend,
// precision and threads its models were compiled with. Returns a line saying
// what was rebuilt and why.
Expected<std::string> RecompileStalePipelineArtifact(const std::string& path, const std::string& stale,
                                                     const nlohmann::json& meta) {
  const std::string source = meta.at("source").at("path").get<std::string>();
  KILN_RETURN_IF_ERROR(CheckRecordedFile(path, source, meta.at("source").at("xxh64").get<std::string>(), stale,
                                         "its pipeline file"));
  OnnxSessionOptions options;
  for (const auto& [name, entry] : meta.at("models").items()) {
    const nlohmann::json& model_source = entry.at("source");
    const fs::path dir = fs::path(model_source.at("path").get<std::string>()).parent_path();
    for (const nlohmann::json& f : model_source.at("files")) {
      KILN_RETURN_IF_ERROR(CheckRecordedFile(path, (dir / f.at("name").get<std::string>()).string(),
                                             f.at("xxh64").get<std::string>(), stale,
                                             fmt::format("the file of model '{}'", name)));
    }
    const nlohmann::json& recorded = entry.at("options");
    options.backend = recorded.at("--backend").get<std::string>();
    KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecision(recorded.at("--precision").get<std::string>()));
    options.threads = recorded.at("--threads").get<int>();
  }
  auto rebuilt = CompilePipelineArtifact(source, options, path);
  if (!rebuilt.ok()) {
    return rebuilt.status().WithContext(fmt::format("rebuilding stale artifact {} from {}", path, source));
  }
  return fmt::format("{} was stale ({}); rebuilt from {}", path, stale, source);
}

}  // namespace

Expected<PipelineArtifactSummary> CompilePipelineArtifact(const std::string& pipeline_path,
                                                          const OnnxSessionOptions& options, const std::string& output) {
  KILN_ASSIGN_OR_RETURN(PipelineSpec spec, ReadPipelineFile(pipeline_path));
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(pipeline_path));
  // Stored as JSON whatever the file's format: the artifact reads one.
  KILN_ASSIGN_OR_RETURN(nlohmann::json pipeline, PipelineTextToJson(text, pipeline_path));
  nlohmann::json meta = {{"kind", "pipeline"},
                         {"source", {{"path", fs::absolute(pipeline_path).string()}, {"xxh64", Hash(text)}}}};
  ArtifactWriter writer;
  TemporaryFiles temporary;
  std::vector<std::unique_ptr<MappedFile>> mapped;
  nlohmann::json models = nlohmann::json::object();
  // The models run one after another: one activation arena serves them all.
  OnnxSessionOptions shared = options;
  shared.shared_arenas = std::make_shared<SharedArenas>();
  for (const auto& [name, path] : spec.models) {
    if (IsArtifactFile(path)) {
      return InvalidArgument("model '{}': {} is already compiled; name its .onnx file in the pipeline", name, path);
    }
    KILN_ASSIGN_OR_RETURN(auto samples, SampleShapes(spec, name, path));
    const std::string part = fmt::format("{}.{}.part", output, mapped.size());
    temporary.paths.push_back(part);
    const std::map<std::string, size_t> needs_before = shared.shared_arenas->needs();
    auto compiled = CompileOnnxArtifact(path, shared, part, samples, ShapeBuckets(spec, name, samples));
    if (!compiled.ok()) return compiled.status().WithContext(fmt::format("model '{}' ({})", name, path));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> file, ArtifactFile::Open(part));
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* m, file->Require("metadata"));
    const nlohmann::json model_meta = nlohmann::json::parse(m->text());
    const std::string section = fmt::format("model.{}", mapped.size());
    models[name] = {{"section", section},
                    {"source", model_meta.at("source")},
                    {"kiln_version", model_meta.value("kiln_version", nlohmann::json())},
                    {"isa", model_meta.value("isa", nlohmann::json())},
                    {"options", model_meta.at("options")},
                    {"input_shapes", model_meta.at("input_shapes")},
                    {"sample_shapes", samples},
                    {"laid_out", model_meta.at("laid_out").size()},
                    {"compiled_graphs", model_meta.value("compiled", nlohmann::json::array()).size()},
                    {"arena_bytes", LargestNewNeed(needs_before, shared.shared_arenas->needs())}};
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> bytes, MappedFile::Open(part));
    mapped.push_back(std::move(bytes));
  }
  meta["models"] = std::move(models);
  meta["arena"] = {{"shared_bytes", shared.shared_arenas->shared_bytes()},
                   {"separate_bytes", shared.shared_arenas->separate_bytes()}};
  // Dictionaries travel in the file: the artifact runs without the files beside it.
  nlohmann::json dictionaries = nlohmann::json::array();
  std::vector<std::string> dictionary_texts;
  for (const PipelineStage& s : spec.stages) {
    if (s.kind != "ctc_decode") continue;
    const std::string path = s.params.at("dictionary").get<std::string>();
    KILN_ASSIGN_OR_RETURN(std::string dict, ReadFileToString(path));
    dictionaries.push_back({{"stage", s.name},
                            {"section", fmt::format("dict.{}", dictionary_texts.size())},
                            {"path", fs::absolute(path).string()},
                            {"bytes", dict.size()},
                            {"xxh64", Hash(dict)}});
    dictionary_texts.push_back(std::move(dict));
  }
  meta["dictionaries"] = std::move(dictionaries);
  KILN_RETURN_IF_ERROR(writer.AddText("metadata", meta.dump(1)));
  KILN_RETURN_IF_ERROR(writer.AddText("pipeline", pipeline.dump(1)));
  for (size_t i = 0; i < dictionary_texts.size(); ++i) {
    KILN_RETURN_IF_ERROR(writer.AddText(fmt::format("dict.{}", i), dictionary_texts[i]));
  }
  for (size_t i = 0; i < mapped.size(); ++i) {
    KILN_RETURN_IF_ERROR(writer.Add(fmt::format("model.{}", i), {mapped[i]->data(), mapped[i]->size()}));
  }
  KILN_RETURN_IF_ERROR(writer.Write(output));
  PipelineArtifactSummary summary;
  summary.models = static_cast<int>(mapped.size());
  std::error_code ec;
  summary.bytes = static_cast<int64_t>(fs::file_size(output, ec));
  return summary;
}

bool IsPipelineArtifact(const std::string& path) { return ArtifactHasSection(path, "pipeline"); }

Expected<LoadedPipeline> OpenPipelineArtifact(const std::string& path, const OnnxSessionOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> opened, ArtifactFile::Open(path));
  std::shared_ptr<const ArtifactFile> file = std::move(opened);
  LoadedPipeline loaded;
  // The models' own artifacts are opened as parts of this file: none of
  // them rebuilds itself, the pipeline is rebuilt whole.
  OnnxSessionOptions model_options = options;
  model_options.recompile_if_stale = false;
  try {
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* meta, file->Require("metadata"));
    loaded.metadata = nlohmann::json::parse(meta->text());
    if (loaded.metadata.value("kind", std::string()) != "pipeline") {
      return InvalidArgument("{} is not a compiled pipeline", path);
    }
    KILN_ASSIGN_OR_RETURN(std::string stale, PipelineStaleReason(*file, loaded.metadata, path));
    if (!stale.empty()) {
      if (!options.recompile_if_stale) {
        return Unsupported("{}: stale artifact: {}; rebuild it on this machine: kiln compile {} -o {} (or run it "
                           "with --recompile-if-stale)",
                           path, stale, loaded.metadata.at("source").at("path").get<std::string>(), path);
      }
      const nlohmann::json recorded = loaded.metadata;
      loaded = LoadedPipeline();
      file.reset();  // unmapped before the file is replaced
      KILN_ASSIGN_OR_RETURN(std::string rebuilt, RecompileStalePipelineArtifact(path, stale, recorded));
      fmt::print(stderr, "note: {}\n", rebuilt);
      return OpenPipelineArtifact(path, model_options);
    }
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* text, file->Require("pipeline"));
    // The stored file's paths name files that need not exist here: the
    // models and dictionaries are the artifact's sections.
    auto spec = ParsePipeline(nlohmann::json::parse(text->text()), "", /*check_files=*/false);
    if (!spec.ok()) return spec.status().WithContext(fmt::format("{}: the stored pipeline", path));
    loaded.spec = std::move(*spec);
    for (const nlohmann::json& d : loaded.metadata.at("dictionaries")) {
      KILN_ASSIGN_OR_RETURN(const ArtifactSection* dict, file->Require(d.at("section").get<std::string>()));
      for (PipelineStage& s : loaded.spec.stages) {
        if (s.name == d.at("stage").get<std::string>()) s.params["dictionary_text"] = std::string(dict->text());
      }
    }
    for (const auto& [name, entry] : loaded.metadata.at("models").items()) {
      const std::string label = fmt::format("{} model '{}'", path, name);
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> inner, StoredModel(*file, entry, label));
      // The model's artifact lies in this file's mapping: it keeps it mapped.
      std::shared_ptr<const ArtifactFile> model_file(inner.release(), [file](const ArtifactFile* f) { delete f; });
      KILN_ASSIGN_OR_RETURN(OnnxArtifact artifact, OpenOnnxArtifactIn(std::move(model_file), label, model_options));
      KILN_ASSIGN_OR_RETURN(loaded.sessions[name], OnnxSession::FromArtifact(std::move(artifact), label));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  for (const auto& [name, path_in_file] : loaded.spec.models) {
    if (!loaded.sessions.count(name)) return Corrupt("{}: model '{}' is not stored", path, name);
  }
  return loaded;
}

}  // namespace kiln
