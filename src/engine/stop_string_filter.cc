// Stop-string detection with hold-back.
#include "engine/stop_string_filter.h"

#include <algorithm>
#include <utility>

namespace kiln {

StopStringFilter::StopStringFilter(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {}

std::string StopStringFilter::Push(std::string_view text, bool check) {
  if (stopped_) return "";
  held_.append(text);
  if (!check || stops_.empty()) return Finish();

  // A stop string can only start inside the held text: anything released
  // earlier was checked not to begin one.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    size_t at = held_.find(stop);
    if (at < first) {
      first = at;
      matched_ = stop;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }

  // Hold back the longest tail that is the beginning of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStringFilter::Finish() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace kiln
