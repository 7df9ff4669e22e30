// Byte sizes: the one parser of them (--kv-cache-memory, --max-body-size), and how they print.
#include "core/byte_size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace kiln {
namespace {

// The multiplier of a unit, or 0 when it is not one.
double UnitScale(std::string_view unit) {
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (u.empty() || u == "b") return 1;
  if (u.size() > 1 && u.back() == 'b') u.pop_back();
  if (u.size() > 1 && u.back() == 'i') u.pop_back();
  if (u == "k") return 1024.0;
  if (u == "m") return 1024.0 * 1024;
  if (u == "g") return 1024.0 * 1024 * 1024;
  if (u == "t") return 1024.0 * 1024 * 1024 * 1024;
  return 0;
}

}  // namespace

Expected<ByteSize> ParseByteSize(std::string_view text) {
  size_t end_of_number = 0;
  while (end_of_number < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end_of_number])) || text[end_of_number] == '.')) {
    ++end_of_number;
  }
  const std::string number(text.substr(0, end_of_number));
  std::string_view unit = text.substr(end_of_number);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  char* parse_end = nullptr;
  const double value = number.empty() ? NAN : std::strtod(number.c_str(), &parse_end);
  if (number.empty() || parse_end != number.c_str() + number.size() || !std::isfinite(value)) {
    return InvalidArgument("expected a size such as 1048576, 64KiB, 512MiB or 2G");
  }
  const double scale = UnitScale(unit);
  if (scale == 0) return InvalidArgument("unknown unit '{}' (use B, k, M, G or T, as in 64KiB or 2G)", unit);
  const double bytes = std::floor(value * scale);
  // 2^63: the sizes that fit in int64_t are below it.
  if (!(bytes < 9223372036854775808.0)) return InvalidArgument("size out of range");
  ByteSize size;
  size.number = value;
  size.has_unit = !unit.empty();
  size.bytes = static_cast<int64_t>(bytes);
  return size;
}

std::string MiBText(double bytes) {
  return fmt::format("{:.1f} MiB", bytes / (1 << 20));
}

}  // namespace kiln
