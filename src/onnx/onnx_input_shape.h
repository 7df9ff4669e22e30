// `--input-shape NAME:DIMS` overrides, e.g. "images:1,3,640,640".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace kiln {

// Adds the override `text` ("name:1,3,640,640"; the name is everything
// before the last ':', the dims are positive integers) to `shapes`; naming
// an input twice is an error.
Status AddOnnxInputShape(const std::string& text, std::map<std::string, std::vector<int64_t>>* shapes);

}  // namespace kiln
