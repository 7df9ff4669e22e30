#include "vision/ctc_decode.h"

#include "core/mapped_file.h"

namespace kiln {

std::vector<std::string> OcrCharactersFromText(const std::string& text) {
  std::vector<std::string> chars{""};
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    chars.push_back(line);
    start = end + 1;
  }
  chars.push_back(" ");
  return chars;
}

Expected<std::vector<std::string>> LoadOcrCharacters(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status().WithContext("OCR dictionary");
  if (text->empty()) return InvalidArgument("OCR dictionary {} is empty", path);
  return OcrCharactersFromText(*text);
}

CtcResult CtcGreedyDecode(const float* probs, int steps, int classes, const std::vector<std::string>& characters) {
  CtcResult r;
  double sum = 0;
  int kept = 0;
  int previous = -1;
  for (int t = 0; t < steps; ++t) {
    const float* row = probs + static_cast<size_t>(t) * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    if (best != 0 && best != previous && best < static_cast<int>(characters.size())) {
      r.text += characters[best];
      sum += row[best];
      ++kept;
    }
    previous = best;
  }
  r.score = kept ? static_cast<float>(sum / kept) : 0.0f;
  return r;
}

}  // namespace kiln
