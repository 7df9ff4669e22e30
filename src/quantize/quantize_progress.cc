// Formatting the quantization progress bar.
#include "quantize/quantize_progress.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kiln {

std::string FormatDuration(double seconds) {
  auto s = static_cast<int64_t>(std::llround(std::max(0.0, std::min(seconds, 1e9))));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string QuantizeProgressLine(const QuantizeProgress& p, int bar_width) {
  double fraction = p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                                      : (p.tensors_total > 0 ? static_cast<double>(p.tensors_done) / p.tensors_total : 1.0);
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int width = std::max(bar_width, 1);
  const int filled = static_cast<int>(fraction * width);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#') +
                    std::string(static_cast<size_t>(width - filled), '.') + "]";
  std::string left;
  if (p.tensors_done >= p.tensors_total) {
    left = fmt::format("done in {}", FormatDuration(p.elapsed_seconds));
  } else if (p.bytes_done == 0 || p.elapsed_seconds <= 0) {
    left = "--:-- left";
  } else {
    left = fmt::format("{} left", FormatDuration(p.elapsed_seconds * (1.0 / fraction - 1.0)));
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  return fmt::format("{} {:>{}}/{} tensors  {:.1f}/{:.1f} MiB  {}", bar, p.tensors_done,
                     static_cast<int>(std::to_string(p.tensors_total).size()), p.tensors_total,
                     static_cast<double>(p.bytes_done) / kMiB, static_cast<double>(p.bytes_total) / kMiB, left);
}

}  // namespace kiln
