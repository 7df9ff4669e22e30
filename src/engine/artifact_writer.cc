// CompileArtifact: load, compile, and store what compiling produced.
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "compiler/artifact_compatibility.h"
#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "engine/model_artifact.h"
#include "engine/model_loader.h"
#include "engine/model_session_options.h"
#include "format/artifact_file.h"
#include "format/model_config_json.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/tokenizer_spec_codec.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// xxh64 and size of a file, for the provenance.
Expected<nlohmann::json> FileHash(const fs::path& p) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(p.string()));
  return nlohmann::json{{"name", p.filename().string()},
                        {"bytes", mapped->size()},
                        {"xxh64", fmt::format("{:016x}", ArtifactChecksum({mapped->data(), mapped->size()}))}};
}

// The tokenizer as Tokenizer::Create takes it, so that loading reads plain
// arrays rather than parsing GGUF metadata or tokenizer.json again. `path`
// is what LoadModel loads the tokenizer from.
Status AddTokenizer(const std::string& path, ArtifactWriter* writer, nlohmann::json* meta) {
  if (path.empty()) {
    (*meta)["tokenizer"] = {{"kind", "none"}};
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, LoadTokenizerSpec(path));
  std::vector<uint8_t> bytes = EncodeTokenizerSpec(spec);
  KILN_RETURN_IF_ERROR(writer->AddText("tok.spec", std::string(bytes.begin(), bytes.end())));
  (*meta)["tokenizer"] = {{"kind", "spec"},
                          {"section", "tok.spec"},
                          {"from", fs::path(spec.source).filename().string()}};
  return Status::Ok();
}

// The weights' dtype as --dtype names it: the generated dtype, or the
// dtype most of the matrices' bytes are in.
std::string WeightsDType(const EngineOptions& options, const WeightStore& weights) {
  if (options.load_format == "dummy") return DTypeName(options.dummy_dtype);
  std::map<DType, uint64_t> bytes;
  for (const Weight& w : weights.weights()) {
    if (w.shape.size() == 2) bytes[w.file_dtype] += w.nbytes;
  }
  DType most = DType::kF32;
  uint64_t max = 0;
  for (const auto& [d, b] : bytes) {
    if (b > max) max = b, most = d;
  }
  return DTypeName(most);
}

}  // namespace

// The model's own files (see model_artifact.h): a folder's safetensors and JSON files, or the .gguf.
Expected<nlohmann::json> ArtifactSourceFiles(const EngineOptions& options) {
  nlohmann::json files = nlohmann::json::array();
  if (options.model.empty()) return files;
  std::error_code ec;
  if (fs::is_directory(options.model, ec)) {
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(options.model, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".safetensors" || ext == ".json" || ext == ".model" || ext == ".txt" ||
                                  ext == ".jinja")) {
        paths.push_back(e.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      KILN_ASSIGN_OR_RETURN(nlohmann::json h, FileHash(p));
      files.push_back(std::move(h));
    }
  } else if (IsFile(options.model)) {
    KILN_ASSIGN_OR_RETURN(nlohmann::json h, FileHash(options.model));
    files.push_back(std::move(h));
  }
  return files;
}

const std::vector<std::string>& ArtifactCompileFlags() {
  static const std::vector<std::string> flags = {"--backend",        "--precision",       "--dtype",
                                                 "--kv-cache-dtype", "--max-num-batched-tokens",
                                                 "--max-model-len",  "--max-num-seqs",    "--block-size"};
  return flags;
}

Expected<ArtifactSummary> CompileArtifact(const EngineOptions& options, const std::string& output) {
  if (options.w8a8) return Unsupported("--w8a8: W8A8 weights cannot be stored in an artifact yet");
  KILN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options));
  if (loaded.weights->format() == ModelFormat::kArtifact) {
    return InvalidArgument("{} is already a compiled artifact", options.model);
  }
  KILN_ASSIGN_OR_RETURN(ModelSessionOptions session, SessionOptionsFor(options, loaded));
  CompileOptions compile_options = ToCompileOptions(session);
  compile_options.keep_compilation = true;  // the graph and plans, so that a load binds them as they are
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> compiled,
                        CompiledModel::Compile(*loaded.weights, compile_options));
  const WeightStore& weights = *loaded.weights;
  const CompileReport& report = compiled->report();

  ArtifactWriter writer;
  nlohmann::json meta = ArtifactProvenance(report.backend, report.isa);
  KILN_ASSIGN_OR_RETURN(nlohmann::json source_files, ArtifactSourceFiles(options));
  meta["source"] = {{"path", options.model.empty() ? "" : fs::absolute(options.model).string()},
                    {"format", ModelFormatName(weights.format())},
                    {"load_format", options.load_format},
                    {"preset", options.preset},
                    {"seed", options.dummy_seed},
                    {"files", source_files}};
  meta["options"] = {{"--backend", options.backend},
                     {"--precision", PrecisionName(options.precision)},
                     {"--dtype", WeightsDType(options, weights)},
                     {"--kv-cache-dtype", DTypeName(options.kv_cache_dtype)},
                     {"--max-num-batched-tokens", options.max_num_batched_tokens},
                     {"--max-model-len", options.max_model_len},
                     {"--max-num-seqs", options.max_num_seqs},
                     {"--block-size", options.block_size}};
  meta["config"] = ModelConfigToJson(weights.config());
  meta["compile_seconds"] = report.compile_seconds;

  ArtifactSummary summary;
  // Sections are named first and added in the order they are read, since
  // a page fault reads ahead into its neighbours: what every load reads
  // (tokenizer, plan, the compiled graph, metadata), then the tensors the
  // kernels read as they are (norms, biases, rows with no packed form),
  // then the packed forms, and last the file rows of packed matrices,
  // which only an embedding lookup or a long prefill reads. A cold start then reads little beyond
  // the bytes it uses.
  std::set<std::string> has_packed;
  for (const auto& [key, matrix] : compiled->packed().all()) has_packed.insert(key.second);
  struct Pending {
    std::string section;
    std::span<const uint8_t> bytes;
  };
  std::vector<Pending> hot_tensors, packed_parts, cold_rows;
  nlohmann::json tensors = nlohmann::json::array();
  std::map<std::string, size_t> tensor_index;
  for (const Weight& w : weights.weights()) {
    const std::string section = fmt::format("t.{}", tensors.size());
    tensor_index[w.name] = tensors.size();
    (has_packed.count(w.name) > 0 ? cold_rows : hot_tensors)
        .push_back({section, {w.data, static_cast<size_t>(w.nbytes)}});
    tensors.push_back({{"name", w.name},
                       {"source_name", w.source_name},
                       {"file", fs::path(w.file).filename().string()},
                       {"dtype", DTypeName(w.dtype)},
                       {"file_dtype", DTypeName(w.file_dtype)},
                       {"shape", w.shape},
                       {"section", section}});
  }
  summary.tensors = static_cast<int64_t>(tensors.size());
  nlohmann::json packed = nlohmann::json::array();
  for (const auto& [key, matrix] : compiled->packed().all()) {
    const auto& [backend, weight] = key;
    auto index = tensor_index.find(weight);
    if (index == tensor_index.end()) return Internal("packed weight {} is not among the model's tensors", weight);
    auto parts = matrix->StoredParts();
    if (!parts.ok()) return parts.status().WithContext(fmt::format("{} on {}", weight, backend));
    nlohmann::json named;
    for (const auto& [part, bytes] : *parts) {
      const std::string section = fmt::format("p.{}.{}", index->second, part);
      packed_parts.push_back({section, bytes});
      named[part] = section;
    }
    packed.push_back({{"backend", backend}, {"weight", weight}, {"layout", matrix->layout()},
                      {"parts", named.is_null() ? nlohmann::json::object() : named}});
  }
  summary.packed = static_cast<int64_t>(packed.size());
  meta["tensors"] = std::move(tensors);
  meta["packed"] = std::move(packed);

  std::string tokenizer_path = options.tokenizer;
  if (tokenizer_path.empty() && loaded.tokenizer != nullptr) tokenizer_path = options.model;
  KILN_RETURN_IF_ERROR(AddTokenizer(tokenizer_path, &writer, &meta).WithContext("storing the tokenizer"));

  std::string generation = "{}";
  std::error_code ec;
  if (!options.model.empty() && fs::is_directory(options.model, ec) &&
      IsFile(fs::path(options.model) / "generation_config.json")) {
    KILN_ASSIGN_OR_RETURN(generation, ReadFileToString((fs::path(options.model) / "generation_config.json").string()));
  }
  KILN_RETURN_IF_ERROR(writer.AddText("generation", std::move(generation)));
  KILN_RETURN_IF_ERROR(writer.AddText("plan", report.ToString(compiled->graph(), false)));
  KILN_RETURN_IF_ERROR(writer.AddText("plan.nodes", report.ToString(compiled->graph(), true)));
  const std::vector<uint8_t>& stored = compiled->stored_compilation();
  KILN_RETURN_IF_ERROR(writer.Add("compiled", {stored.data(), stored.size()}, kVerifyAtOpen));
  KILN_RETURN_IF_ERROR(writer.AddText("metadata", meta.dump(1)));
  for (const std::vector<Pending>* group : {&hot_tensors, &packed_parts, &cold_rows}) {
    for (const Pending& p : *group) KILN_RETURN_IF_ERROR(writer.Add(p.section, p.bytes));
  }
  KILN_RETURN_IF_ERROR(writer.Write(output));
  summary.bytes = static_cast<int64_t>(fs::file_size(output, ec));
  summary.compile_seconds = report.compile_seconds;
  return summary;
}

}  // namespace kiln
