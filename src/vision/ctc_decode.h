// Greedy CTC decoding of a text recognizer's per-step class probabilities,
// with PaddleOCR's character list: class 0 is the CTC blank, classes
// 1..N the dictionary's lines in order, class N + 1 a space.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

// The dictionary file: one character (UTF-8) per line; "\r\n" endings are
// accepted. Returns the full class list: "" (blank), the lines, " ".
Expected<std::vector<std::string>> LoadOcrCharacters(const std::string& path);
std::vector<std::string> OcrCharactersFromText(const std::string& text);

struct CtcResult {
  std::string text;
  float score = 0;  // the mean of the kept steps' probabilities; 0 for no text
};

// `probs` is [steps, classes] (rows of probabilities). Each step's best
// class; repeats of the previous step's class and blanks dropped.
// REQUIRES: classes == characters.size().
CtcResult CtcGreedyDecode(const float* probs, int steps, int classes, const std::vector<std::string>& characters);

}  // namespace kiln
