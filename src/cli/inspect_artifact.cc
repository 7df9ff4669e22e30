// `kiln inspect` for compiled artifacts.
#include "cli/inspect_artifact.h"

#include <ctime>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/compilation_codec.h"
#include "core/byte_size.h"
#include "engine/model_artifact.h"
#include "format/artifact_file.h"

namespace kiln::cli {
namespace {

std::string Time(int64_t t) {
  std::time_t time = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&time, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buffer;
}

// What an LLM's artifact holds: options, the model, tensors, packed matrices, tokenizer.
void PrintLlmArtifact(const ArtifactFile& file, const nlohmann::json& m) {
  std::string options;
  for (const std::string& flag : ArtifactCompileFlags()) {
    const nlohmann::json& v = m.at("options").at(flag);
    options += fmt::format("{}{} {}", options.empty() ? "" : " ", flag,
                           v.is_string() ? v.get<std::string>() : v.dump());
  }
  fmt::print("options: {}\n", options);
  const nlohmann::json& c = m.at("config");
  fmt::print("model: {} ({}), {} layers, hidden {}, vocabulary {}\n", c.at("arch_name").get<std::string>(),
             c.at("hf_architecture").get<std::string>(), c.at("num_layers").get<int64_t>(),
             c.at("hidden_size").get<int64_t>(), c.at("vocab_size").get<int64_t>());
  uint64_t tensor_bytes = 0, packed_bytes = 0;
  for (const ArtifactSection& s : file.sections()) {
    if (s.name.rfind("t.", 0) == 0) tensor_bytes += s.bytes;
    if (s.name.rfind("p.", 0) == 0) packed_bytes += s.bytes;
  }
  std::map<std::string, int> layouts;
  for (const nlohmann::json& p : m.at("packed")) {
    ++layouts[p.at("backend").get<std::string>() + ":" + p.at("layout").get<std::string>()];
  }
  fmt::print("tensors: {}, {}\n", m.at("tensors").size(), MiBText(static_cast<double>(tensor_bytes)));
  fmt::print("packed: {} matrices, {} beside the tensors:", m.at("packed").size(),
             MiBText(static_cast<double>(packed_bytes)));
  for (const auto& [layout, n] : layouts) fmt::print(" {} x {}", n, layout);
  fmt::print("\n");
  const nlohmann::json& tok = m.at("tokenizer");
  const std::string kind = tok.at("kind").get<std::string>();
  if (kind == "spec") {
    fmt::print("tokenizer: compiled from {}\n", tok.value("from", std::string("?")));
  } else if (kind == "folder") {
    fmt::print("tokenizer: files {}\n", fmt::join(tok.at("files").get<std::vector<std::string>>(), ", "));
  } else {
    fmt::print("tokenizer: {}\n", kind == "gguf" ? "GGUF metadata" : "none (token ids in and out)");
  }
  // Loading binds the stored graph and plans; without them (an earlier
  // kiln's artifact), it runs the stages again.
  const ArtifactSection* compiled = file.Find("compiled");
  auto key = compiled != nullptr ? CompilationKeyOf({compiled->data, compiled->bytes})
                                 : Expected<std::string>(NotFound("none"));
  if (key.ok()) {
    fmt::print("compiled graph and plans: {}, bound as they are at load ({})\n",
               MiBText(static_cast<double>(compiled->bytes)), *key);
  } else {
    fmt::print("compiled graph and plans: {}; the stages run again at load\n",
               compiled == nullptr ? "not stored" : key.status().message());
  }
}

// What an ONNX graph's artifact holds: options, inputs and outputs, the
// constants stored in their kernels' layouts.
void PrintOnnxArtifact(const ArtifactFile& file, const nlohmann::json& m) {
  const nlohmann::json& o = m.at("options");
  std::string fixed;
  for (const nlohmann::json& name : o.value("--fixed-input", nlohmann::json::array())) {
    fixed += " --fixed-input " + name.get<std::string>();
  }
  fmt::print("options: --backend {} --precision {} --threads {}{}{}\n", o.at("--backend").get<std::string>(),
             o.at("--precision").get<std::string>(), o.at("--threads").get<int>(), fixed,
             o.at("fuse").get<bool>() ? "" : " (unfused)");
  // The fixed inputs' values are stored: a run takes no value for them.
  const nlohmann::json none = nlohmann::json::array();
  for (const char* side : {"inputs", "fixed_inputs", "outputs"}) {
    const std::string label = side == std::string("fixed_inputs") ? "fixed input (its value stored)"
                                                                   : std::string(side).substr(0, std::strlen(side) - 1);
    for (const nlohmann::json& t : m.contains(side) ? m.at(side) : none) {
      fmt::print("{}: {} {}[{}]\n", label, t.at("name").get<std::string>(), t.at("dtype").get<std::string>(),
                 fmt::join(t.at("dims").get<std::vector<int64_t>>(), ","));
    }
  }
  std::map<std::string, int> layouts;
  uint64_t bytes = 0;
  for (const nlohmann::json& e : m.at("laid_out")) {
    const std::string layout = e.at("layout").get<std::string>();
    ++layouts[layout.substr(0, layout.find(':'))];
    bytes += e.at("bytes").get<uint64_t>();
  }
  fmt::print("in kernel layouts: {} constants, {}:", m.at("laid_out").size(),
             MiBText(static_cast<double>(bytes)));
  for (const auto& [layout, n] : layouts) fmt::print(" {} x {}", n, layout);
  fmt::print("\n");
  // Their weights are among the layouts above; a CPU without bf16 products
  // finds the file stale.
  if (const int bf16 = m.value("bf16_products", 0); bf16 > 0) fmt::print("bf16 products: {}\n", bf16);
  const ArtifactSection* graph = file.Find("onnx.model");
  fmt::print("graph: the .onnx file, {}, with {} external data files\n",
             MiBText(static_cast<double>(graph != nullptr ? graph->bytes : 0)), m.at("external_data").size());
  // Static shapes (or the sample shape and buckets of open ones): the graph
  // after the stages and its plan, bound at load; other shapes (or an
  // earlier kiln's file) compile from the graph.
  const nlohmann::json stored = m.value("compiled", nlohmann::json::array());
  if (!stored.empty()) {
    uint64_t bytes = 0;
    for (const nlohmann::json& c : stored) {
      const ArtifactSection* s = file.Find(c.at("section").get<std::string>());
      bytes += s != nullptr ? s->bytes : 0;
    }
    fmt::print("compiled graphs and plans: {} ({}), bound as they are at load; constants the stages made: {}\n",
               stored.size(), MiBText(static_cast<double>(bytes)),
               MiBText(static_cast<double>(m.value("compiled_constants_bytes", uint64_t{0}))));
    for (const nlohmann::json& c : stored) fmt::print("  {}\n", c.at("key").get<std::string>());
  } else {
    fmt::print("compiled graphs and plans: not stored; the stages run at load, per input shape\n");
  }
}

}  // namespace

Status PrintArtifact(const std::string& path, bool verify, bool plan, bool nodes) {
  KILN_ASSIGN_OR_RETURN(OpenedArtifact a, OpenArtifact(path));
  const ArtifactFile& file = *a.file;
  const nlohmann::json& m = a.metadata;
  try {
    fmt::print("artifact: {}\n", path);
    fmt::print("format: kiln artifact version {}, {} sections, {}\n", file.format_version(),
               file.sections().size(), MiBText(static_cast<double>(file.size())));
    fmt::print("compiled by: kiln {} (kernel-layout version {}), {}\n",
               m.at("kiln_version").get<std::string>(), m.at("kernel_layout_version").get<int>(),
               Time(m.at("created").get<int64_t>()));
    fmt::print("backend: {}, ISA {}\n", m.at("backend").get<std::string>(), m.at("isa").get<std::string>());
    const nlohmann::json& cpu = m.at("cpu");
    fmt::print("cpu: {}; features: {}\n", cpu.at("model").get<std::string>(),
               fmt::join(cpu.at("features").get<std::vector<std::string>>(), " "));
    const nlohmann::json& source = m.at("source");
    fmt::print("source: {} ({})\n", source.at("path").get<std::string>(),
               source.at("format").get<std::string>());
    if (source.value("load_format", std::string()) == "dummy") {
      fmt::print("  generated weights: preset '{}', seed {}\n", source.at("preset").get<std::string>(),
                 source.at("seed").get<uint64_t>());
    }
    for (const nlohmann::json& f : source.at("files")) {
      fmt::print("  {}  {} bytes  xxh64 {}\n", f.at("name").get<std::string>(), f.at("bytes").get<uint64_t>(),
                 f.at("xxh64").get<std::string>());
    }
    if (m.value("kind", std::string()) == "onnx") {
      PrintOnnxArtifact(file, m);
    } else {
      PrintLlmArtifact(file, m);
    }
    fmt::print("compile time: {:.3f} s\n", m.at("compile_seconds").get<double>());
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("{}: metadata: {}", path, e.what());
  }
  if (verify) {
    KILN_RETURN_IF_ERROR(file.VerifyAll());
    fmt::print("verified: every section's xxh64 checksum matches ({} sections)\n", file.sections().size());
  }
  if (plan) {
    KILN_ASSIGN_OR_RETURN(const ArtifactSection* s, file.Require(nodes ? "plan.nodes" : "plan"));
    fmt::print("\n{}", s->text());
  }
  return Status::Ok();
}

}  // namespace kiln::cli
