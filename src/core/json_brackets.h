// Following the nesting of JSON text byte by byte, with brackets inside
// strings (escapes included) left out: for limiting nesting before a parse
// and for finding where a value being streamed ends.
#pragma once

namespace kiln {

class JsonBrackets {
 public:
  // Takes the next byte; returns the nesting depth after it (a closing
  // bracket with nothing open leaves it at 0).
  int Push(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '[' || c == '{') {
      ++depth_;
    } else if ((c == ']' || c == '}') && depth_ > 0) {
      --depth_;
    }
    return depth_;
  }
  int depth() const { return depth_; }

 private:
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace kiln
