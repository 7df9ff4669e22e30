// Opening a compiled artifact: staleness checks, options, and the model.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>

#include <fmt/format.h>

#include "backend/backend.h"
#include "compiler/artifact_compatibility.h"
#include "core/page_prefault.h"
#include "engine/model_artifact.h"
#include "engine/model_loader.h"
#include "format/artifact_file.h"
#include "format/gguf.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/tokenizer_spec_codec.h"

namespace kiln {
namespace fs = std::filesystem;

namespace {

std::string RebuildHint(const std::string& path, const nlohmann::json& meta) {
  std::string source = meta.value(nlohmann::json::json_pointer("/source/path"), std::string());
  if (source.empty()) source = "MODEL";
  return fmt::format("rebuild it on this machine: kiln compile {} -o {}", source, path);
}

Expected<std::string> StaleReason(const std::string& path, const nlohmann::json& meta) {
  return ArtifactStaleReason(path, meta);
}

Status CheckRuns(const std::string& path, const nlohmann::json& meta, std::string* note) {
  return CheckArtifactRuns(path, meta, RebuildHint(path, meta), note);
}

// A flag's value as the metadata records it and as `options` holds it.
std::string OptionValue(const std::string& flag, const EngineOptions& o) {
  if (flag == "--backend") return o.backend;
  if (flag == "--precision") return PrecisionName(o.precision);
  if (flag == "--dtype") return DTypeName(o.dummy_dtype);
  if (flag == "--kv-cache-dtype") return DTypeName(o.kv_cache_dtype);
  if (flag == "--max-num-batched-tokens") return std::to_string(o.max_num_batched_tokens);
  if (flag == "--max-model-len") return std::to_string(o.max_model_len);
  if (flag == "--max-num-seqs") return std::to_string(o.max_num_seqs);
  if (flag == "--block-size") return std::to_string(o.block_size);
  return "";
}

Status SetOption(const std::string& flag, const nlohmann::json& value, EngineOptions* o) {
  if (flag == "--backend") {
    o->backend = value.get<std::string>();
  } else if (flag == "--precision") {
    KILN_ASSIGN_OR_RETURN(o->precision, ParsePrecision(value.get<std::string>()));
  } else if (flag == "--dtype") {
    auto d = DTypeFromName(value.get<std::string>());
    if (!d) return Corrupt("unknown dtype {}", value.dump());
    o->dummy_dtype = *d;
  } else if (flag == "--kv-cache-dtype") {
    auto d = DTypeFromName(value.get<std::string>());
    if (!d) return Corrupt("unknown KV cache dtype {}", value.dump());
    o->kv_cache_dtype = *d;
  } else if (flag == "--max-num-batched-tokens") {
    o->max_num_batched_tokens = value.get<int32_t>();
  } else if (flag == "--max-model-len") {
    o->max_model_len = value.get<int32_t>();
  } else if (flag == "--max-num-seqs") {
    o->max_num_seqs = value.get<int32_t>();
  } else if (flag == "--block-size") {
    o->block_size = value.get<int32_t>();
  }
  return Status::Ok();
}

std::string Recorded(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Writes the stored tokenizer files into a fresh private folder and loads
// them from there, as LoadTokenizer loads a model folder; the folder is
// removed afterwards.
Expected<std::unique_ptr<Tokenizer>> LoadFolderTokenizer(const ArtifactFile& file, const nlohmann::json& tok) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "kiln-tokenizer-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return IoError("cannot create a folder for the artifact's tokenizer");
  const fs::path folder(pattern);
  struct Remove {
    fs::path p;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } remove{folder};
  for (const nlohmann::json& name : tok.at("files")) {
    const std::string n = name.get<std::string>();
    if (n.empty() || n.find('/') != std::string::npos || n == "." || n == "..") {
      return Corrupt("{}: tokenizer file name '{}'", file.name(), n);
    }
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file.Require("tok." + n));
    std::ofstream out(folder / n, std::ios::binary);
    out.write(reinterpret_cast<const char*>(s->data), static_cast<std::streamsize>(s->bytes));
    if (!out) return IoError("cannot write the artifact's tokenizer file {}", n);
  }
  const std::string entry = tok.value("entry", std::string());
  return LoadTokenizer(entry.empty() ? folder.string() : (folder / entry).string());
}

}  // namespace

Expected<OpenedArtifact> OpenArtifact(const std::string& path, bool recompile_if_stale) {
  OpenedArtifact a;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> file, ArtifactFile::Open(path));
  a.file = std::move(file);
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* meta, a.file->Require("metadata"));
  try {
    a.metadata = nlohmann::json::parse(meta->text());
    if (recompile_if_stale) {
      KILN_ASSIGN_OR_RETURN(std::string stale, StaleReason(path, a.metadata));
      if (!stale.empty()) {
        a = OpenedArtifact();  // unmapped before the file is replaced
        KILN_ASSIGN_OR_RETURN(std::string rebuilt, RecompileStaleArtifact(path));
        fmt::print(stderr, "note: {}\n", rebuilt);
        return OpenArtifact(path, /*recompile_if_stale=*/false);
      }
    }
    KILN_RETURN_IF_ERROR(CheckRuns(path, a.metadata, &a.note));
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  return a;
}

Expected<std::string> RecompileStaleArtifact(const std::string& path) {
  EngineOptions source;
  std::string stale;
  nlohmann::json recorded_files;
  {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> file, ArtifactFile::Open(path));
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* section, file->Require("metadata"));
    try {
      const nlohmann::json meta = nlohmann::json::parse(section->text());
      KILN_ASSIGN_OR_RETURN(stale, StaleReason(path, meta));
      if (stale.empty()) return InvalidArgument("{}: not stale, nothing to rebuild", path);
      for (const std::string& flag : ArtifactCompileFlags()) {
        KILN_RETURN_IF_ERROR(SetOption(flag, meta.at("options").at(flag), &source));
      }
      const nlohmann::json& from = meta.at("source");
      source.model = from.at("path").get<std::string>();
      source.load_format = from.at("load_format").get<std::string>();
      source.preset = from.at("preset").get<std::string>();
      source.dummy_seed = from.at("seed").get<uint64_t>();
      recorded_files = from.at("files");
    } catch (const nlohmann::json::exception& e) {
      return Corrupt("{}: metadata: {}", path, e.what());
    }
  }
  std::error_code ec;
  if (!source.model.empty() && !fs::exists(source.model, ec)) {
    return NotFound("{}: stale artifact ({}), and its source {} is gone: compile it again from the model "
                    "(kiln compile MODEL -o {})",
                    path, stale, source.model, path);
  }
  KILN_ASSIGN_OR_RETURN(nlohmann::json current_files, ArtifactSourceFiles(source));
  const std::string from = source.model.empty() ? fmt::format("generated weights (--preset '{}', seed {})",
                                                              source.preset, source.dummy_seed)
                                                : source.model;
  // CompileArtifact writes beside the file and renames it over it: a
  // reader never sees half a file, and a failure leaves the stale one.
  const auto start = std::chrono::steady_clock::now();
  auto summary = CompileArtifact(source, path);
  if (!summary.ok()) return summary.status().WithContext(fmt::format("rebuilding stale artifact {} from {}", path, from));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return fmt::format("{} was stale ({}); rebuilt from {} in {:.2f} s{}", path, stale, from, seconds,
                     current_files == recorded_files ? ""
                                                     : "; the source's files changed since it was first compiled, "
                                                       "so it holds their current contents");
}

Status ApplyArtifactOptions(const nlohmann::json& metadata, const std::set<std::string>* given,
                            EngineOptions* options) {
  const EngineOptions defaults;
  if (metadata.value("kind", std::string()) == "onnx") {
    return InvalidArgument("the artifact holds a compiled ONNX graph, not a language model: run it with kiln run, "
                           "detect, ocr or bench latency (C API: kiln_onnx_model_load)");
  }
  try {
    const nlohmann::json& recorded = metadata.at("options");
    for (const std::string& flag : ArtifactCompileFlags()) {
      const nlohmann::json& value = recorded.at(flag);
      const bool is_given = given != nullptr ? given->count(flag) > 0
                                             : OptionValue(flag, *options) != OptionValue(flag, defaults);
      if (is_given) {
        EngineOptions wanted = *options;
        KILN_RETURN_IF_ERROR(SetOption(flag, value, &wanted));
        if (OptionValue(flag, wanted) != OptionValue(flag, *options)) {
          return InvalidArgument(
              "{} {}: the artifact was compiled with {} {}; leave the flag out, or compile another artifact "
              "with it",
              flag, OptionValue(flag, *options), flag, Recorded(value));
        }
      }
      KILN_RETURN_IF_ERROR(SetOption(flag, value, options));
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("artifact metadata: {}", e.what());
  }
  return Status::Ok();
}

namespace {

// MADV_RANDOM on the whole pages of `range` (a read-only file mapping's).
void AdviseRandomAccess(std::span<const uint8_t> range) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(range.data()) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(range.data()) + range.size()) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_RANDOM);
}

}  // namespace

Expected<LoadedModel> LoadArtifact(const EngineOptions& options, TokenizerLoad when) {
  const std::string& path = options.model;
  OpenedArtifact opened;
  if (options.opened_artifact == nullptr || options.opened_artifact->file->name() != path) {
    KILN_ASSIGN_OR_RETURN(opened, OpenArtifact(path));
  }
  const OpenedArtifact& a = opened.file != nullptr ? opened : *options.opened_artifact;
  if (!a.note.empty()) fmt::print(stderr, "note: {}\n", a.note);
  // An option set away from its default must be the one compiled with
  // (callers make the options the artifact's: ApplyArtifactOptions).
  {
    EngineOptions expected = options;
    KILN_RETURN_IF_ERROR(ApplyArtifactOptions(a.metadata, nullptr, &expected));
  }
  if (options.load_format == "dummy") return InvalidArgument("--load-format dummy: {} holds its weights", path);
  if (options.verify_weights) KILN_RETURN_IF_ERROR(a.file->VerifyAll());
  LoadedModel loaded;
  // The packed matrices are what the first forward pass reads whole: their
  // page tables can be filled while the engine waits for its tokenizer.
  // (Not the file rows, which only embedding lookups read.)
  if (a.file->mapped()) {
    std::vector<std::span<const uint8_t>> packed;
    for (const ArtifactSection& s : a.file->sections()) {
      if (s.name.rfind("p.", 0) == 0) packed.push_back(s.span());
      // The large tensors read as they are (the embedding table) are read a
      // row at a time, or not at all (a matrix's rows when its packed copy
      // is what the kernels read): a fault there reads its own page, not
      // the 8 MiB around it (4 MiB of a 0.5B model's embedding table read
      // for a 3-token prompt on a cold start).
      if (s.name.rfind("t.", 0) == 0 && s.bytes >= (uint64_t{1} << 20)) AdviseRandomAccess(s.span());
    }
    loaded.prefault = std::make_shared<PagePrefault>(std::move(packed), a.file);
    // On a cold start the reads are under way while the model is bound.
    loaded.prefault->ReadInMissingPages();
  }
  try {
    KILN_ASSIGN_OR_RETURN(loaded.weights,
                          WeightStore::FromArtifact(a.file, a.metadata.at("config").dump(),
                                                    a.metadata.at("tensors").dump(), a.metadata.at("packed").dump()));
    if (!options.tokenizer.empty()) {
      KILN_ASSIGN_OR_RETURN(loaded.tokenizer, LoadTokenizer(options.tokenizer));
    } else {
      const nlohmann::json& tok = a.metadata.at("tokenizer");
      const std::string kind = tok.at("kind").get<std::string>();
      if (kind == "spec") {
        KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, a.file->Require(tok.at("section").get<std::string>()));
        KILN_ASSIGN_OR_RETURN(TokenizerSpec spec, DecodeTokenizerSpec({s->data, s->bytes}, path));
        if (when == TokenizerLoad::kInBackground) {
          loaded.pending_tokenizer =
              std::async(std::launch::async, [spec = std::move(spec)]() mutable {
                using Built = Expected<std::shared_ptr<const Tokenizer>>;
                auto built = Tokenizer::Create(std::move(spec));
                if (!built.ok()) return Built(built.status());
                return Built(std::shared_ptr<const Tokenizer>(std::move(built).value()));
              }).share();
        } else {
          KILN_ASSIGN_OR_RETURN(loaded.tokenizer, Tokenizer::Create(std::move(spec)));
        }
      } else if (kind == "gguf") {  // written by earlier kiln versions, as are "folder" ones
        KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, a.file->Require(tok.at("section").get<std::string>()));
        KILN_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Parse(s->data, s->bytes, path));
        KILN_ASSIGN_OR_RETURN(loaded.tokenizer, LoadTokenizerFromGguf(*gguf));
      } else if (kind == "folder") {
        auto tokenizer = LoadFolderTokenizer(*a.file, tok);
        if (!tokenizer.ok()) return tokenizer.status().WithContext(fmt::format("{}: tokenizer", path));
        loaded.tokenizer = std::move(*tokenizer);
      } else if (kind != "none") {
        return Corrupt("{}: tokenizer kind '{}'", path, kind);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* generation, a.file->Require("generation"));
  KILN_ASSIGN_OR_RETURN(loaded.generation, ParseGenerationConfig(std::string(generation->text()), path));
  return loaded;
}

}  // namespace kiln
