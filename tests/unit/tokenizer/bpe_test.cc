// kiln's priority-queue BPE against GPT-2's plain merge loop on long
// pseudo-random words, and very long words end to end.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <map>
#include <random>

#include "tokenizer/byte_unicode.h"
#include "tokenizer_test_util.h"

namespace kiln::testing {
namespace bpe_tests {

class NaiveBpe {
 public:
  explicit NaiveBpe(const std::string& folder) {
    vocab_ =
        nlohmann::json::parse(ReadTestFile(folder + "/vocab.json")).get<std::map<std::string, int32_t>>();
    std::istringstream merges(ReadTestFile(folder + "/merges.txt"));
    std::string line;
    while (std::getline(merges, line)) {
      if (line.rfind("#version", 0) == 0 || line.empty()) continue;
      size_t space = line.find(' ');
      ranks_.emplace(std::make_pair(line.substr(0, space), line.substr(space + 1)),
                     static_cast<int>(ranks_.size()));
    }
  }

  std::vector<int32_t> Encode(std::string_view word) const {
    std::vector<std::string> parts;
    for (char c : word) parts.push_back(ByteToUnicodeUtf8(static_cast<uint8_t>(c)));
    while (parts.size() > 1) {
      int best = std::numeric_limits<int>::max();
      for (size_t k = 0; k + 1 < parts.size(); ++k) {
        auto it = ranks_.find({parts[k], parts[k + 1]});
        if (it != ranks_.end()) best = std::min(best, it->second);
      }
      if (best == std::numeric_limits<int>::max()) break;
      std::vector<std::string> merged;
      for (size_t k = 0; k < parts.size(); ++k) {
        auto it = k + 1 < parts.size() ? ranks_.find({parts[k], parts[k + 1]}) : ranks_.end();
        if (it != ranks_.end() && it->second == best) {
          merged.push_back(parts[k] + parts[k + 1]);
          ++k;
        } else {
          merged.push_back(parts[k]);
        }
      }
      parts.swap(merged);
    }
    std::vector<int32_t> ids;
    for (const std::string& p : parts) ids.push_back(vocab_.at(p));
    return ids;
  }

 private:
  std::map<std::string, int32_t> vocab_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
};

std::string RandomWord(std::mt19937& rng, size_t length, std::string_view alphabet) {
  std::string word;
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (size_t i = 0; i < length; ++i) word += alphabet[pick(rng)];
  return word;
}

TEST(BpeTest, PriorityQueueMergingEqualsTheNaiveLoop) {
  std::string folder = TokenizerDataDir() + "/qwen2";
  auto tok = LoadTokenizerOrFail(folder);
  ASSERT_NE(tok, nullptr);
  NaiveBpe naive(folder);
  std::mt19937 rng(1234);
  for (size_t length : {1, 2, 3, 7, 16, 40, 100, 333, 1000, 2000}) {
    for (std::string_view alphabet : {"etaoinshr", "ab", "qxzjkv", "e"}) {
      std::string word = RandomWord(rng, length, alphabet);
      ASSERT_EQ(IdsToString(tok->Encode(word, false)), IdsToString(naive.Encode(word))) << word;
    }
  }
}

TEST(BpeTest, VeryLongWordsEncodeAndRoundTrip) {
  // A quadratic merge loop would take minutes here; the queue takes
  // milliseconds. (Timing is not asserted; the test's own timeout is the
  // guard.)
  std::mt19937 rng(99);
  std::string word = RandomWord(rng, 10000, "etaoinshrdlucmfwyp");
  for (const std::string& path : {TokenizerDataDir() + "/qwen2", TokenizerDataDir() + "/llama3",
                                  TokenizerDataDir() + "/llama2/tokenizer.model", ModelDir("tiny-llama")}) {
    SCOPED_TRACE(path);
    auto tok = LoadTokenizerOrFail(path);
    ASSERT_NE(tok, nullptr);
    for (int repeat = 0; repeat < 20; ++repeat) {
      std::vector<int32_t> ids = tok->Encode(word, false);
      ASSERT_LT(ids.size(), word.size());
      ASSERT_EQ(tok->Decode(ids), word);
    }
    std::string same(100000, 'a');
    EXPECT_EQ(tok->Decode(tok->Encode(same, false)), same);
  }
}

}  // namespace bpe_tests
}  // namespace kiln::testing
