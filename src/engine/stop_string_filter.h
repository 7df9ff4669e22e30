// Streams generated text while watching for stop strings: text that could
// be the beginning of a stop string is held back until it is known not to
// be, so a stop string is never streamed out, not even in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class StopStringFilter {
 public:
  // REQUIRES: no stop string is empty.
  explicit StopStringFilter(std::vector<std::string> stop_strings);

  // Adds generated text and returns what may be released now. With
  // `check` false (before min_tokens) stop strings are not looked for and
  // everything is released. Once a stop string is found, returns the text
  // before it and stopped() turns true; later calls return "".
  std::string Push(std::string_view text, bool check = true);

  // Releases whatever is held back (at the end of generation).
  std::string Finish();

  bool stopped() const { return stopped_; }
  // The stop string that was found, or "".
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace kiln
