// Any bytes, any ids, many threads: encoding stays in the vocabulary, decoding
// stays well-formed, and bad files are reported by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/utf8.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace robustness_tests {

std::string RandomBytes(std::mt19937& rng, size_t length) {
  std::uniform_int_distribution<int> byte(0, 255), ascii(0, 3);
  std::string s;
  for (size_t i = 0; i < length; ++i) {
    // Mostly ASCII, so that malformed bytes sit between real words.
    s += static_cast<char>(ascii(rng) == 0 ? byte(rng) : "ab <|>\n#é"[byte(rng) % 9]);
  }
  return s;
}

std::string Lossy(std::string_view s) {
  std::string out;
  AppendUtf8Lossy(s, out);
  return out;
}

struct RobustnessCase {
  const char* path;
  bool exact_round_trip;  // false where normalization may change valid text
};

class RobustnessTest : public ::testing::TestWithParam<RobustnessCase> {};

TEST_P(RobustnessTest, ArbitraryBytesEncodeAndDecodeBack) {
  auto tok = LoadTokenizerOrFail(SharedDir() + "/" + GetParam().path);
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(42);
  for (int i = 0; i < 400; ++i) {
    std::string text = RandomBytes(rng, i % 97);
    for (bool parse_special : {false, true}) {
      std::vector<int32_t> ids = tok->Encode(text, true, parse_special);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << id;
      std::string decoded = tok->Decode(ids);
      ASSERT_TRUE(IsValidUtf8(decoded));
      if (GetParam().exact_round_trip && !parse_special) {
        // Malformed input bytes survive encoding (byte-level tokens or byte
        // fallback); Decode then writes each malformed run as U+FFFD.
        ASSERT_EQ(decoded, Lossy(text)) << "input #" << i;
      }
    }
  }
}

TEST_P(RobustnessTest, ArbitraryIdsDecodeToWellFormedText) {
  auto tok = LoadTokenizerOrFail(SharedDir() + "/" + GetParam().path);
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(-5, tok->vocab_size() + 5);
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> ids(i % 50);
    for (int32_t& x : ids) x = id(rng);
    for (bool skip : {true, false}) {
      ASSERT_TRUE(IsValidUtf8(tok->Decode(ids, skip)));
      ExpectStreamingMatchesDecode(*tok, ids, skip);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, RobustnessTest,
                         ::testing::Values(RobustnessCase{"data/tokenizers/gpt2", true},
                                           RobustnessCase{"data/tokenizers/llama3", true},
                                           RobustnessCase{"data/tokenizers/qwen2", false},
                                           RobustnessCase{"data/tokenizers/llama2/tokenizer.model", true},
                                           RobustnessCase{"data/tokenizers/llama2/tokenizer.json", true},
                                           RobustnessCase{"models/tiny-llama", true},
                                           RobustnessCase{"models/tiny-qwen2", false}));

TEST(TokenizerThreadsTest, ConcurrentEncodesAgree) {
  // Encode is const and keeps no shared mutable state: threads sharing one
  // tokenizer must all get the single-threaded answer.
  std::string text = ReadTestFile(SharedDir() + "/data/text/heldout.txt").substr(0, 20000);
  for (const std::string& path : {ModelDir("tiny-qwen2"), ModelDir("tiny-llama")}) {
    auto tok = LoadTokenizerOrFail(path);
    ASSERT_NE(tok, nullptr);
    std::vector<int32_t> expected = tok->Encode(text);
    std::vector<std::vector<int32_t>> results(4);
    std::vector<std::thread> threads;
    for (auto& result : results) {
      threads.emplace_back([&tok, &text, &result] {
        for (int i = 0; i < 5; ++i) result = tok->Encode(text);
      });
    }
    for (std::thread& t : threads) t.join();
    for (const auto& result : results) EXPECT_EQ(result, expected) << path;
  }
}

TEST(TokenizerLoadErrorsTest, MissingAndBrokenFilesAreReported) {
  auto missing = LoadTokenizer(SharedDir() + "/no/such/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no/such/model"), std::string::npos);

  std::string dir = MakeTempDir();
  auto empty = LoadTokenizer(dir);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no tokenizer files"), std::string::npos);

  std::ofstream(dir + "/tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2]}}";
  auto broken = LoadTokenizer(dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(broken.status().message().find("tokenizer.json"), std::string::npos)
      << broken.status().ToString();
  EXPECT_NE(broken.status().message().find("vocab"), std::string::npos);

  std::filesystem::remove(dir + "/tokenizer.json");
  std::ofstream(dir + "/vocab.json") << "{\"a\": 0}";
  auto no_merges = LoadTokenizer(dir);
  ASSERT_FALSE(no_merges.ok());
  EXPECT_NE(no_merges.status().message().find("merges.txt"), std::string::npos)
      << no_merges.status().ToString();

  std::ofstream(dir + "/merges.txt") << "#version: 0.2\na b\n";
  auto bad_merge = LoadTokenizer(dir);
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("merge 0"), std::string::npos) << bad_merge.status().ToString();

  std::ofstream(dir + "/merges.txt") << "";
  std::ofstream(dir + "/tokenizer_config.json") << "{\"add_bos_token\": \"yes\"}";
  auto bad_config = LoadTokenizer(dir);
  ASSERT_FALSE(bad_config.ok());
  EXPECT_NE(bad_config.status().message().find("tokenizer_config.json"), std::string::npos);
  EXPECT_NE(bad_config.status().message().find("add_bos_token"), std::string::npos);
}

TEST(TokenizerLoadErrorsTest, TruncatedAndGarbageSentencePieceModels) {
  std::string model = ReadTestFile(TokenizerDataDir() + "/llama2/tokenizer.model");
  std::string dir = MakeTempDir();
  std::mt19937 rng(5);
  for (size_t cut : {size_t{1}, size_t{7}, size_t{1000}, model.size() / 2, model.size() - 3}) {
    std::ofstream(dir + "/tokenizer.model", std::ios::binary) << model.substr(0, cut);
    auto tok = LoadTokenizer(dir + "/tokenizer.model");
    EXPECT_FALSE(tok.ok()) << "cut at " << cut;
  }
  for (int i = 0; i < 50; ++i) {
    std::string garbage = model.substr(0, 4000);
    for (int k = 0; k < 20; ++k) garbage[rng() % garbage.size()] = static_cast<char>(rng());
    std::ofstream(dir + "/tokenizer.model", std::ios::binary) << garbage;
    auto tok = LoadTokenizer(dir + "/tokenizer.model");  // must return, whatever it says
    if (tok.ok()) (*tok)->Decode((*tok)->Encode("garbage in, garbage out"));
  }
}

}  // namespace robustness_tests
}  // namespace kiln::testing
