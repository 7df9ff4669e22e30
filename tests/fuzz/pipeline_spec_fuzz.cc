// Fuzzes the pipeline file readers: the bytes as YAML (pipeline_yaml.h)
// and as JSON, each tree then through the one schema check (ParsePipeline).
// Every refusal must say why; a pipeline accepted has its stages in an
// order where each follows those it reads, and its outputs name stages.
#include <cstdint>
#include <set>
#include <string>

#include "vision/pipeline_spec.h"
#include "vision/pipeline_yaml.h"

namespace {

void Check(const nlohmann::json& json) {
  auto spec = kiln::ParsePipeline(json, "", /*check_files=*/false);
  if (!spec.ok()) {
    if (spec.status().message().empty()) __builtin_trap();
    return;
  }
  std::set<std::string> seen;
  for (const kiln::PipelineStage& s : spec->stages) {
    for (const auto& [port, from] : s.inputs) {
      if (from != "image" && !seen.count(from)) __builtin_trap();
    }
    seen.insert(s.name);
  }
  for (const std::string& o : spec->outputs) {
    if (!seen.count(o)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, int> lines;
  auto yaml = kiln::PipelineYamlToJson(text, "fuzz.yaml", &lines);
  if (yaml.ok()) {
    Check(*yaml);
    auto spec = kiln::ParsePipeline(*yaml, "", false);
    if (!spec.ok() && kiln::WithYamlLine(spec.status(), *yaml, lines, "fuzz.yaml").message().empty()) {
      __builtin_trap();
    }
  } else if (yaml.status().message().empty()) {
    __builtin_trap();
  }
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_discarded()) Check(json);
  return 0;
}
