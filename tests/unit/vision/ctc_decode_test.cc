// Greedy CTC decoding with PaddleOCR's character list.
#include <gtest/gtest.h>

#include "vision/ctc_decode.h"

namespace kiln {
namespace ctc_decode_tests {

TEST(OcrCharacters, BlankFirstSpaceLast) {
  const auto chars = OcrCharactersFromText("a\r\nb\n中\n");
  EXPECT_EQ(chars, (std::vector<std::string>{"", "a", "b", "中", " "}));
  EXPECT_EQ(OcrCharactersFromText("x\ny"), (std::vector<std::string>{"", "x", "y", " "}));
}

TEST(CtcGreedyDecode, CollapsesRepeatsAndDropsBlanks) {
  const auto chars = OcrCharactersFromText("a\nb\nc");  // 0 blank, 1 a, 2 b, 3 c, 4 space
  // Steps' best classes: a a blank a b b space c blank.
  const std::vector<int> best{1, 1, 0, 1, 2, 2, 4, 3, 0};
  const std::vector<float> p{0.9f, 0.8f, 0.99f, 0.7f, 0.6f, 0.95f, 0.5f, 0.4f, 0.9f};
  std::vector<float> probs(best.size() * 5, 0.0f);
  for (size_t t = 0; t < best.size(); ++t) {
    for (int c = 0; c < 5; ++c) probs[t * 5 + c] = (1 - p[t]) / 4;
    probs[t * 5 + best[t]] = p[t];
  }
  const CtcResult r = CtcGreedyDecode(probs.data(), static_cast<int>(best.size()), 5, chars);
  EXPECT_EQ(r.text, "aab c");
  // Kept steps: 0 (a 0.9), 3 (a 0.7), 4 (b 0.6), 6 (space 0.5), 7 (c 0.4).
  EXPECT_NEAR(r.score, (0.9 + 0.7 + 0.6 + 0.5 + 0.4) / 5, 1e-6);
}

TEST(CtcGreedyDecode, AllBlankIsEmptyWithScoreZero) {
  const auto chars = OcrCharactersFromText("a");
  const std::vector<float> probs{0.9f, 0.05f, 0.05f, 0.8f, 0.1f, 0.1f};
  const CtcResult r = CtcGreedyDecode(probs.data(), 2, 3, chars);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.score, 0.0f);
}

}  // namespace ctc_decode_tests
}  // namespace kiln
