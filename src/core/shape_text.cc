// Shapes as text.
#include "core/shape_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {

std::string ShapeText(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace kiln
