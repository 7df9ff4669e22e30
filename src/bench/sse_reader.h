// Server-sent events (text/event-stream) split out of bytes as they arrive,
// for timing each streamed chunk of an OpenAI-compatible response.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kiln::bench {

class SseReader {
 public:
  // Calls on_event with the data of every event completed by `bytes`: its
  // "data:" lines joined by newlines (one leading space dropped from each).
  // Comments, other fields and events without data are skipped. Lines may
  // end in "\n", "\r\n" or "\r", and may be split anywhere across calls.
  void Feed(std::string_view bytes, const std::function<void(const std::string& data)>& on_event);

  // Bytes held for an unfinished line (a caller may drop a stream whose
  // lines grow without end).
  size_t pending_bytes() const { return line_.size(); }

 private:
  void EndLine(const std::function<void(const std::string&)>& on_event);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

}  // namespace kiln::bench
