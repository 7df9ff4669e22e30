// `kiln generate` end to end: streamed greedy output, speed report, chat
// templates, refusals, seeded sampling, prompt files and --dump.
// GCC 12 at -O1 warns falsely inside std::regex's std::function members.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"

namespace kiln {
namespace generate_cli_tests {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `kiln generate ARGS` with stdout and stderr captured (in a folder of
// its own, so that a test's MakeTempDir() stays intact).
RunResult Generate(const std::vector<std::string>& args) {
  static int runs = 0;
  std::string dir = testing::BinaryDir() + "/test_tmp/generate_cli." + std::to_string(::getpid()) + "." +
                    std::to_string(runs++);
  std::filesystem::create_directories(dir);
  std::string cmd = ShellQuote(testing::KilnBinary()) + " generate";
  for (const std::string& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(dir + "/out") + " 2>" + ShellQuote(dir + "/err");
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(dir + "/out");
  r.err = ReadAll(dir + "/err");
  return r;
}

std::string Model(const char* name) {
  return testing::ModelDir(name);
}

TEST(GenerateCliTest, StreamsTheGreedyContinuationAndReportsSpeed) {
  nlohmann::json ref = engine_test::Reference("tiny-qwen2", 0);
  RunResult r = Generate({"-m", Model("tiny-qwen2"), "-p", ref["prompt"].get<std::string>(), "-n", "64",
                          "--ignore-eos", "--precision", "fp32", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ref["greedy"]["decoded_new"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("prefill: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode: 63 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// A passage of held-out text, twice, then its first words: the n-gram
// drafts are often right, and the text is the same as without them.
TEST(GenerateCliTest, NgramSpeculationReportsAcceptanceAndChangesNoText) {
  const std::string text = ReadAll(testing::SharedDir() + "/data/text/heldout.txt");
  ASSERT_GT(text.size(), 2000u);
  const std::string passage = text.substr(1000, 600);
  const std::string prompt = passage + "\n\n" + passage + "\n\n" + passage.substr(0, 80);
  std::vector<std::string> args = {"-m",           Model("tiny-qwen2"), "-p", prompt,      "-n", "96",
                                   "--ignore-eos", "--temperature",     "0",  "--threads", "2"};
  RunResult plain = Generate(args);
  args.insert(args.end(), {"--spec-method", "ngram", "--spec-tokens", "5"});
  RunResult speculative = Generate(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(speculative.exit_code, 0) << speculative.err;
  EXPECT_EQ(speculative.out, plain.out);
  EXPECT_EQ(plain.err.find("speculation:"), std::string::npos) << plain.err;
  EXPECT_NE(speculative.err.find("speculation: "), std::string::npos) << speculative.err;
  // The summary's figures agree with each other.
  std::smatch m;
  const std::regex summary(
      R"(speculation: (\d+) of (\d+) draft tokens accepted \(([\d.]+)%\), ([\d.]+) accepted per verification pass )"
      R"(\((\d+) passes\); ([\d.]+) ms drafting, ([\d.]+) ms in target passes)");
  ASSERT_TRUE(std::regex_search(speculative.err, m, summary)) << speculative.err;
  const double accepted = std::stod(m[1]), drafted = std::stod(m[2]), percent = std::stod(m[3]),
               per_pass = std::stod(m[4]), passes = std::stod(m[5]), drafting = std::stod(m[6]),
               target = std::stod(m[7]);
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, drafted);
  EXPECT_LE(drafted, 5 * passes);
  EXPECT_NEAR(percent, 100 * accepted / drafted, 0.051);
  EXPECT_NEAR(per_pass, accepted / passes, 0.0051);
  EXPECT_GE(drafting, 0);
  EXPECT_GT(target, 0);
  EXPECT_LT(drafting, target);  // prompt lookup is cheap next to the passes
  // The decode count is of tokens kept, the same either way; its time
  // includes the drafting.
  EXPECT_NE(speculative.err.find("decode: 95 tokens"), std::string::npos) << speculative.err;
  EXPECT_NE(speculative.err.find("tokens/s, drafting included)"), std::string::npos) << speculative.err;
  EXPECT_EQ(plain.err.find("drafting included"), std::string::npos) << plain.err;

  RunResult bad = Generate({"-m", Model("tiny-qwen2"), "-p", "x", "--spec-method", "ngram",
                            "--spec-ngram-min", "3", "--spec-ngram-max", "2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("spec-ngram-min"), std::string::npos) << bad.err;
}

// The same passage with a draft model: the model itself at q4_0, then
// tiny-qwen2 for tiny-qwen3 (one tokenizer); the KV cache split is printed
// and the text is the same as without a draft.
TEST(GenerateCliTest, DraftModelSpeculationPrintsTheKvSplitAndChangesNoText) {
  const std::string text = ReadAll(testing::SharedDir() + "/data/text/heldout.txt");
  ASSERT_GT(text.size(), 2000u);
  const std::string passage = text.substr(1000, 600);
  const std::string prompt = passage + "\n\n" + passage + "\n\n" + passage.substr(0, 80);
  std::vector<std::string> args = {"-m",           Model("tiny-qwen3"), "-p", prompt,      "-n", "64",
                                   "--ignore-eos", "--temperature",     "0",  "--threads", "2"};
  RunResult plain = Generate(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const std::vector<std::string>& draft :
       {std::vector<std::string>{"--spec-method", "draft", "--draft-model", "self", "--draft-dtype", "q4_0"},
        std::vector<std::string>{"--spec-method", "draft", "--draft-model", Model("tiny-qwen2")}}) {
    std::vector<std::string> with_draft = args;
    with_draft.insert(with_draft.end(), draft.begin(), draft.end());
    RunResult speculative = Generate(with_draft);
    ASSERT_EQ(speculative.exit_code, 0) << speculative.err;
    EXPECT_EQ(speculative.out, plain.out);
    EXPECT_NE(speculative.err.find("kv cache: target "), std::string::npos) << speculative.err;
    EXPECT_NE(speculative.err.find(" blocks ("), std::string::npos) << speculative.err;
    EXPECT_NE(speculative.err.find("accepted per verification pass"), std::string::npos) << speculative.err;
  }

  RunResult mismatch = Generate(
      {"-m", Model("tiny-qwen3"), "-p", "x", "--spec-method", "draft", "--draft-model", Model("tiny-llama")});
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_NE(mismatch.err.find("vocabulary differs"), std::string::npos) << mismatch.err;
  RunResult missing = Generate({"-m", Model("tiny-qwen3"), "-p", "x", "--spec-method", "draft"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("needs a draft model"), std::string::npos) << missing.err;
}

TEST(GenerateCliTest, ChatNeedsATemplate) {
  RunResult none = Generate({"-m", Model("tiny-llama"), "-p", "Hello", "--chat", "-n", "4"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no chat template"), std::string::npos) << none.err;

  RunResult chat = Generate({"-m", Model("tiny-qwen2"), "-p", "Hello", "--chat", "-n", "4", "--ignore-eos",
                             "--output", "jsonl", "--threads", "2"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  auto j = nlohmann::json::parse(chat.out);
  // "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n
  // <|im_start|>assistant\n": the special tokens became single ids.
  EXPECT_GT(j["prompt_tokens"].get<int>(), 10);
  EXPECT_EQ(j["completion_tokens"], 4);
}

TEST(GenerateCliTest, APromptLongerThanTheContextIsAClearError) {
  std::string text;
  for (int i = 0; i < 800; ++i) text += "and it came to pass ";
  RunResult r = Generate({"-m", Model("tiny-qwen3"), "-p", text, "-n", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not fit the context of 1024 tokens"), std::string::npos) << r.err;
}

TEST(GenerateCliTest, SeededSamplingIsReproducibleAcrossRuns) {
  std::vector<std::string> args = {"-m",           Model("tiny-llama"), "-p",  "In the beginning", "-n",
                                   "40",           "--temperature",     "1.0", "--top-p",          "0.95",
                                   "--ignore-eos", "--threads",         "2"};
  auto with_seed = [&](const char* seed) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--seed", seed});
    return Generate(a);
  };
  RunResult a = with_seed("11"), b = with_seed("11"), c = with_seed("12");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(GenerateCliTest, PromptFilesRunTogetherWithTheirOwnParameters) {
  std::string dir = testing::MakeTempDir();
  std::string file = dir + "/prompts.jsonl";
  {
    nlohmann::json ref = engine_test::Reference("tiny-qwen2", 0);
    std::ofstream f(file);
    f << nlohmann::json({{"prompt", ref["prompt"]}, {"max_tokens", 64}, {"stop", "morning"}}).dump() << "\n";
    f << nlohmann::json({{"prompt_ids", {100, 200, 300}}, {"max_tokens", 5}, {"ignore_eos", true}}).dump()
      << "\n";
    f << nlohmann::json({{"prompt", "Blessed are"}, {"max_tokens", 3}, {"ignore_eos", true}}).dump() << "\n";
  }
  RunResult r = Generate({"-m", Model("tiny-qwen2"), "-f", file, "--output", "jsonl", "--precision", "fp32",
                          "--temperature", "0", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> results;
  for (std::string line; std::getline(lines, line);) results.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(results.size(), 3u) << r.out;
  EXPECT_EQ(results[0]["text"], " a man that is in the ");
  EXPECT_EQ(results[0]["finish_reason"], "stop");
  EXPECT_EQ(results[1]["completion_tokens"], 5);
  EXPECT_EQ(results[1]["prompt_tokens"], 3);
  EXPECT_EQ(results[2]["completion_tokens"], 3);
  EXPECT_EQ(results[2]["finish_reason"], "length");
  EXPECT_NE(r.err.find("3 requests"), std::string::npos) << r.err;

  RunResult bad = Generate({"-m", Model("tiny-qwen2"), "-f", dir + "/missing.jsonl"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("missing.jsonl"), std::string::npos) << bad.err;
}

// The logits of the first pass, as dumped, are the reference's.
TEST(GenerateCliTest, DumpWritesEveryPassWithTheLogits) {
  std::string dir = testing::MakeTempDir() + "/dump";
  nlohmann::json ref = engine_test::Reference("tiny-llama", 0);
  RunResult r = Generate({"-m", Model("tiny-llama"), "-p", ref["prompt"].get<std::string>(), "-n", "3",
                          "--ignore-eos", "--precision", "fp32", "--threads", "2", "--dump", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json index = nlohmann::json::parse(ReadAll(dir + "/index.json"));
  ASSERT_EQ(index["passes"].size(), 3u);  // the prompt, then two decode steps
  const nlohmann::json& first = index["passes"][0];
  EXPECT_EQ(first["token_ids"], ref["input_ids"]);
  std::string logits_file;
  int layer_values = 0;
  for (const auto& v : first["values"]) {
    if (v["name"] == "logits") logits_file = v["file"];
    if (v["name"].get<std::string>().find("layers.3") != std::string::npos) ++layer_values;
  }
  EXPECT_GT(layer_values, 0) << "no per-layer values in the dump";
  ASSERT_FALSE(logits_file.empty());
  std::string npy = ReadAll(dir + "/" + logits_file);
  ASSERT_GT(npy.size(), 10u);
  size_t header = static_cast<uint8_t>(npy[8]) | (static_cast<size_t>(static_cast<uint8_t>(npy[9])) << 8);
  ASSERT_EQ(npy.size(), 10 + header + 2048 * sizeof(float));
  std::vector<float> logits(2048);
  std::memcpy(logits.data(), npy.data() + 10 + header, 2048 * sizeof(float));
  std::vector<float> expected = ref["last_logits"].get<std::vector<float>>();
  float max_diff = 0;
  for (size_t i = 0; i < 2048; ++i) max_diff = std::max(max_diff, std::abs(logits[i] - expected[i]));
  EXPECT_LT(max_diff, 1e-3f);
}

}  // namespace generate_cli_tests
}  // namespace kiln
