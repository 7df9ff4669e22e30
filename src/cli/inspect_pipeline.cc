#include "cli/inspect_pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "format/artifact_file.h"
#include "vision/pipeline_spec.h"

namespace kiln::cli {
namespace {

std::string ShapeText(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "";
  std::vector<std::string> d;
  for (int64_t v : dims) d.push_back(v < 0 ? "?" : std::to_string(v));
  return fmt::format("f32[{}]", fmt::join(d, ","));
}

}  // namespace

Status PrintPipelineArtifact(const std::string& path, bool verify, bool plan, bool nodes) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> file, ArtifactFile::Open(path));
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* meta_section, file->Require("metadata"));
  KILN_ASSIGN_OR_RETURN(const ArtifactSection* pipeline_section, file->Require("pipeline"));
  try {
    const nlohmann::json m = nlohmann::json::parse(meta_section->text());
    auto spec = ParsePipeline(nlohmann::json::parse(pipeline_section->text()), "", /*check_files=*/false);
    if (!spec.ok()) return spec.status().WithContext(fmt::format("{}: the stored pipeline", path));
    fmt::print("artifact: {} (a pipeline of {} models)\n", path, m.at("models").size());
    fmt::print("format: kiln artifact version {}, {} sections, {}\n", file->format_version(),
               file->sections().size(), MiBText(static_cast<double>(file->size())));
    fmt::print("source: {} (xxh64 {})\n", m.at("source").at("path").get<std::string>(),
               m.at("source").at("xxh64").get<std::string>());
    fmt::print("stages, in run order:\n");
    for (const PipelineStage& s : spec->stages) {
      std::vector<std::string> reads;
      for (const auto& [port, from] : s.inputs) {
        auto output = s.input_outputs.find(port);
        reads.push_back(output == s.input_outputs.end() ? fmt::format("{}={}", port, from)
                                                        : fmt::format("{}={}.{}", port, from, output->second));
      }
      fmt::print("  {:<12} {:<15} {:<40} {}\n", s.name, s.kind == "model" ? "model " + s.model : s.kind,
                 fmt::format("{}", fmt::join(reads, " ")), ShapeText(s.shape));
    }
    std::vector<std::pair<std::string, std::unique_ptr<ArtifactFile>>> models;
    for (const auto& [name, e] : m.at("models").items()) {
      KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file->Require(e.at("section").get<std::string>()));
      fmt::print(
          "model {}: section {}, {}, kiln {} for ISA {}, --backend {} --precision {}, {} constants in "
          "kernel layouts\n",
          name, s->name, MiBText(static_cast<double>(s->bytes)), e.at("kiln_version").get<std::string>(),
          e.at("isa").get<std::string>(), e.at("options").at("--backend").get<std::string>(),
          e.at("options").at("--precision").get<std::string>(), e.at("laid_out").get<int64_t>());
      fmt::print("  compiled graphs stored: {} (bound by runs at those input shapes; others compile at run time)\n",
                 e.value("compiled_graphs", 0));
      fmt::print("  source: {}\n", e.at("source").at("path").get<std::string>());
      for (const nlohmann::json& f : e.at("source").at("files")) {
        fmt::print("    {}  {} bytes  xxh64 {}\n", f.at("name").get<std::string>(),
                   f.at("bytes").get<uint64_t>(), f.at("xxh64").get<std::string>());
      }
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactFile> inner,
                            ArtifactFile::Parse(s->data, s->bytes, fmt::format("{} model '{}'", path, name)));
      models.emplace_back(name, std::move(inner));
    }
    for (const nlohmann::json& d : m.at("dictionaries")) {
      fmt::print("dictionary of stage {}: section {}, {} bytes, xxh64 {} (from {})\n",
                 d.at("stage").get<std::string>(), d.at("section").get<std::string>(),
                 d.at("bytes").get<uint64_t>(), d.at("xxh64").get<std::string>(),
                 d.at("path").get<std::string>());
    }
    if (verify) {
      KILN_RETURN_IF_ERROR(file->VerifyAll());
      size_t sections = file->sections().size();
      for (const auto& [name, inner] : models) {
        KILN_RETURN_IF_ERROR(inner->VerifyAll());
        sections += inner->sections().size();
      }
      fmt::print("verified: every section's xxh64 checksum matches ({} sections, the models' own included)\n",
                 sections);
    }
    if (plan) {
      // The buffers passed between stages, and the one arena the models'
      // intermediates share.
      fmt::print("\nmemory across stages:\n");
      for (const PipelineStage& s : spec->stages) {
        if (s.kind != "model") continue;
        const std::string& from = s.inputs.at("input");
        fmt::print(
            "  {}: reads {}'s buffer in place (bound as the model's input, no copy); its output buffer is "
            "read in place by the stages after it\n",
            s.name, from);
      }
      fmt::print("  crops and resizes make new buffers (the stages' own work)\n");
      if (m.contains("arena")) {
        const auto shared = m.at("arena").at("shared_bytes").get<uint64_t>();
        fmt::print(
            "  activations: one arena for every model, {} bytes ({}), the largest model's need; separate "
            "arenas: {} bytes\n",
            shared, MiBText(static_cast<double>(shared)), m.at("arena").at("separate_bytes").get<uint64_t>());
        for (const auto& [name, e] : m.at("models").items()) {
          fmt::print("    model {}: needs {} bytes\n", name, e.value("arena_bytes", uint64_t{0}));
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  return Status::Ok();
}

}  // namespace kiln::cli
