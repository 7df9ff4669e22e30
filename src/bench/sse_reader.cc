// The event-stream grammar, reduced to what a streaming client needs.
#include "bench/sse_reader.h"

namespace kiln::bench {

void SseReader::Feed(std::string_view bytes, const std::function<void(const std::string&)>& on_event) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the second half of "\r\n"
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      EndLine(on_event);
    } else {
      line_ += c;
    }
  }
}

void SseReader::EndLine(const std::function<void(const std::string&)>& on_event) {
  if (line_.empty()) {  // a blank line dispatches the event
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view line = line_;
  if (line.substr(0, 5) == "data:") {
    std::string_view value = line.substr(5);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (line == "data") {
    if (has_data_) data_ += '\n';
    has_data_ = true;
  }
  line_.clear();
}

}  // namespace kiln::bench
