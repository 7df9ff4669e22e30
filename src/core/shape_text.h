// A tensor shape as error messages and listings print it: "[2, 3, 4]".
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace kiln {

std::string ShapeText(std::span<const int64_t> shape);

}  // namespace kiln
