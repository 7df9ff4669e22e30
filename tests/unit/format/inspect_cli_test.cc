// End to end: `kiln inspect` on the tiny models prints their parameter counts,
// and on every GGUF file the tensor type counts goldens.json lists.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "testing/test_paths.h"

namespace kiln {
namespace inspect_cli_tests {

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

CliRun RunInspect(const std::string& arguments) {
  std::string command = testing::KilnBinary() + " inspect " + arguments + " 2>&1";
  CliRun run{-1, ""};
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

CliRun Inspect(const std::string& model) { return RunInspect("'" + model + "'"); }

// The text after "<key>: " on its line, or "".
std::string Field(const std::string& output, const std::string& key) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
  }
  return "";
}

int64_t ParseGrouped(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c == ',') continue;
    if (c < '0' || c > '9') break;
    digits += c;
  }
  return digits.empty() ? -1 : std::stoll(digits);
}

// "F32 21, Q5_0 24" -> {F32: 21, Q5_0: 24}.
std::map<std::string, int> ParseCounts(const std::string& text) {
  std::map<std::string, int> counts;
  std::istringstream in(text);
  std::string name, count;
  while (in >> name >> count) {
    if (!count.empty() && count.back() == ',') count.pop_back();
    counts[name] = std::stoi(count);
  }
  return counts;
}

const std::map<std::string, int64_t> kParameters = {
    {"tiny-llama", 1262720}, {"tiny-qwen2", 1050752}, {"tiny-qwen3", 3672832}};

TEST(InspectCli, HuggingFaceFolders) {
  for (const auto& [model, params] : kParameters) {
    CliRun run = Inspect(testing::ModelDir(model));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(ParseGrouped(Field(run.output, "parameters")), params) << model;
    EXPECT_EQ(Field(run.output, "format"), "Hugging Face");
    EXPECT_EQ(Field(run.output, "context length"), "1024");
    EXPECT_EQ(Field(run.output, "layers"), "4");
    EXPECT_EQ(Field(run.output, "vocab size"), "2048");
    EXPECT_NE(Field(run.output, "kv cache per 1,000 tokens"), "");
    EXPECT_NE(Field(run.output, "memory for weights"), "");
  }
  CliRun qwen2 = Inspect(testing::ModelDir("tiny-qwen2"));
  EXPECT_EQ(Field(qwen2.output, "dtypes"), "f32 50");
  EXPECT_EQ(Field(qwen2.output, "heads"), "4, kv heads: 2, head dim: 32");
  EXPECT_EQ(Field(qwen2.output, "tied embeddings"), "yes");
  // 2 (K, V) x 4 layers x 2 KV heads x 32 dims x 4 bytes x 1000 tokens = 2,048,000 bytes.
  EXPECT_EQ(Field(qwen2.output, "kv cache per 1,000 tokens"), "f32 2.0 MiB, bf16/f16 1.0 MiB");
}

TEST(InspectCli, GgufFilesMatchTheGoldens) {
  std::string dir = testing::ModelDir("gguf");
  auto text = ReadFileToString(dir + "/goldens.json");
  ASSERT_TRUE(text.ok());
  auto goldens = nlohmann::json::parse(*text);
  for (const auto& [name, golden] : goldens["files"].items()) {
    SCOPED_TRACE(name);
    CliRun run = Inspect(dir + "/" + name);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(ParseCounts(Field(run.output, "tensor types")),
              (golden["tensor_type_counts"].get<std::map<std::string, int>>()))
        << run.output;
    EXPECT_EQ(ParseGrouped(Field(run.output, "parameters")),
              kParameters.at(golden["model"].get<std::string>()));
    std::string stem = name.substr(0, name.size() - 5);
    EXPECT_EQ(Field(run.output, "file type"), stem.substr(stem.rfind('-') + 1));
    EXPECT_EQ(Field(run.output, "format"), "GGUF");
  }
}

// A mixture's preset, without weights: its experts, the parameters a token
// computes with, and what its weights would need.
TEST(InspectCli, PresetsOfMixturesOfExperts) {
  CliRun run = RunInspect("--preset qwen3-30b-a3b");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(ParseGrouped(Field(run.output, "parameters")), 30532122624);
  EXPECT_EQ(ParseGrouped(Field(run.output, "active parameters per token")), 3353032704);
  EXPECT_EQ(Field(run.output, "experts"), "128, 8 per token, intermediate size 768, weights renormalized to sum 1");
  EXPECT_NE(Field(run.output, "memory for weights").find("q4_0 16379.4 MiB"), std::string::npos) << run.output;
  EXPECT_EQ(RunInspect("").exit_code, 2);
  EXPECT_EQ(RunInspect("--preset gpt-5").exit_code, 1);
}

TEST(InspectCli, ErrorsGoToStderrWithAnExitCode) {
  CliRun run = Inspect(testing::ModelDir("no-such-model"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("kiln inspect: not found:"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("no-such-model"), std::string::npos) << run.output;
}

}  // namespace inspect_cli_tests
}  // namespace kiln
