#include "onnx/onnx_input_shape.h"

#include <charconv>

namespace kiln {

Status AddOnnxInputShape(const std::string& text, std::map<std::string, std::vector<int64_t>>* shapes) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("input shape '{}' is not NAME:DIMS (e.g. images:1,3,640,640)", text);
  }
  std::string name = text.substr(0, colon);
  std::string dims_text = text.substr(colon + 1);
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= dims_text.size()) {
    size_t comma = dims_text.find(',', pos);
    if (comma == std::string::npos) comma = dims_text.size();
    const char* begin = dims_text.data() + pos;
    const char* end = dims_text.data() + comma;
    int64_t d = 0;
    auto [ptr, ec] = std::from_chars(begin, end, d);
    if (ec != std::errc() || ptr != end || d <= 0) {
      return InvalidArgument("input shape '{}': '{}' is not a positive dimension", text,
                             std::string(begin, end));
    }
    dims.push_back(d);
    pos = comma + 1;
  }
  if (!shapes->emplace(name, std::move(dims)).second) {
    return InvalidArgument("input shape for '{}' given twice", name);
  }
  return Status::Ok();
}

}  // namespace kiln
