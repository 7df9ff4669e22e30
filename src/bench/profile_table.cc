// Formatting the profile summary as the terminal table.
#include "bench/profile_table.h"

#include <fmt/format.h>

#include "bench/text_table.h"

namespace kiln::bench {
namespace {

std::string Time(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string Amount(double v, const char* unit) {
  if (v <= 0) return "-";
  if (v >= 1e9) return fmt::format("{:.2f} G{}", v / 1e9, unit);
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, unit);
  if (v >= 1e3) return fmt::format("{:.1f} k{}", v / 1e3, unit);
  return fmt::format("{:.0f} {}", v, unit);
}

}  // namespace

std::string BoundOf(double flops, double bytes, const ProfilePeaks& peaks) {
  if (peaks.compute.per_second <= 0 || peaks.bandwidth.per_second <= 0 || bytes <= 0) return "";
  const double ridge = peaks.compute.per_second / peaks.bandwidth.per_second;  // FLOP per byte
  return flops / bytes >= ridge ? "compute" : "memory";
}

double RooflineFraction(const ProfileRow& row, const ProfilePeaks& peaks) {
  const std::string bound = BoundOf(row.flops, row.bytes, peaks);
  if (bound.empty() || row.seconds <= 0) return 0;
  if (bound == "compute") return row.flops / row.seconds / peaks.compute.per_second;
  return row.bytes / row.seconds / peaks.bandwidth.per_second;
}

std::string FormatProfileTable(const std::vector<PhaseProfile>& phases, const ProfilePeaks& peaks) {
  std::string out;
  if (peaks.compute.per_second > 0 && peaks.bandwidth.per_second > 0) {
    out += fmt::format("roofline: {} ({}), {} ({}); ridge at {:.1f} FLOP/byte\n",
                       FormatRate(peaks.compute.per_second, "FLOP/s"), peaks.compute.figure,
                       FormatRate(peaks.bandwidth.per_second, "B/s"), peaks.bandwidth.figure,
                       peaks.compute.per_second / peaks.bandwidth.per_second);
  }
  for (const PhaseProfile& p : phases) {
    out += fmt::format("\n{}: {} steps, {} ({} a step); kernels {:.1f}%, the rest {:.1f}%\n", p.name, p.steps,
                       Time(p.step_seconds), Time(p.step_seconds / static_cast<double>(p.steps)),
                       p.step_seconds > 0 ? 100 * p.kernel_seconds() / p.step_seconds : 0.0,
                       p.step_seconds > 0 ? 100 * p.other_seconds() / p.step_seconds : 0.0);
    TextTable t({"op", "calls", "total", "mean", "% step", "bytes", "FLOPs", "GB/s", "GFLOP/s", "% roofline",
                 "bound"});
    auto add = [&](const ProfileRow& r) {
      const double share = p.step_seconds > 0 ? r.seconds / p.step_seconds : 0;
      const double fraction = RooflineFraction(r, peaks);
      t.AddRow({r.name, std::to_string(r.calls), Time(r.seconds),
                Time(r.calls > 0 ? r.seconds / static_cast<double>(r.calls) : 0), fmt::format("{:.1f}", 100 * share),
                Amount(r.bytes, "B"), Amount(r.flops, "FLOP"),
                r.bytes > 0 && r.seconds > 0 ? fmt::format("{:.2f}", r.bytes / r.seconds / 1e9) : "-",
                r.flops > 0 && r.seconds > 0 ? fmt::format("{:.2f}", r.flops / r.seconds / 1e9) : "-",
                fraction > 0 ? fmt::format("{:.1f}", 100 * fraction) : "-", BoundOf(r.flops, r.bytes, peaks)});
    };
    for (const ProfileRow& r : p.kernels) add(r);
    for (const ProfileRow& r : p.other) add(r);
    out += t.ToString();
  }
  return out;
}

}  // namespace kiln::bench
