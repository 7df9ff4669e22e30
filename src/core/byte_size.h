// Sizes in bytes as people write them on a command line, and read them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

// A parsed size: the number as written, whether a unit followed it, and the
// number of bytes it stands for.
struct ByteSize {
  double number = 0;
  bool has_unit = false;
  int64_t bytes = 0;  // number times the unit, rounded down
};

// Parses a non-negative decimal number (digits and a decimal point), then
// optionally spaces and a unit, case-insensitive: "B" (bytes), or k, M, G
// or T (powers of 1024), each optionally followed by "i" and/or "B". No unit
// means bytes. So "1048576", "64KiB", "16MiB", "512MiB", "2G", "1.5GB",
// "300 M" and "1t" are sizes; "-1G", "1.2.3G", "12X" and "nan" are not.
// Sizes of 2^63 bytes and more are refused. Errors say what was wrong,
// without naming the option (the caller does).
Expected<ByteSize> ParseByteSize(std::string_view text);

// A size for people to read, in MiB to one decimal: "12.3 MiB".
std::string MiBText(double bytes);

}  // namespace kiln
