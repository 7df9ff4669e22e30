// `kiln bench roofline`: this machine's limits per thread count (peak
// arithmetic rates from register-resident loops, read bandwidth of a large
// buffer with 4 KiB and with huge pages), cached as JSON so that the other
// modes can say what fraction of them a model reaches.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/contention.h"
#include "bench/statistics.h"
#include "core/status.h"

namespace kiln::bench {

struct RooflineOptions {
  // Thread counts to measure; empty: 1 .. the physical cores.
  std::vector<int> thread_counts;
  int repetitions = 5;                     // the figure is their median
  double seconds_per_repetition = 0.2;     // each compute repetition runs about this long
  int64_t buffer_bytes = int64_t{1} << 30;  // the bandwidth buffer (at least 1 GiB to defeat caches)
  bool measure_bandwidth = true;
  // Called with a line of progress before each measurement.
  std::function<void(const std::string&)> on_progress;
};

// One arithmetic rate at one thread count.
struct ComputeFigure {
  std::string name;          // "fp32_fma", "bf16_dot", "int8_dot", "bf16_widen_fma", ...
  std::string instructions;  // what the loop issues
  std::string unit;          // "FLOP/s" or "OP/s" (int8 multiply-adds counted as two)
  bool supported = true;
  std::string note;  // why unsupported
  double per_second = 0;  // the fastest repetition's rate, all threads together
  Summary repetitions;    // per-repetition rates
  ContentionReading contention;
};

// Streaming-read bandwidth at one thread count with one page size.
struct BandwidthFigure {
  std::string pages;  // "4k" or "thp"
  double bytes_per_s = 0;  // the fastest repetition's rate
  Summary repetitions;
  int64_t buffer_bytes = 0;
  int64_t huge_page_bytes = 0;  // AnonHugePages the buffer actually got
  ContentionReading contention;
};

struct RooflineRow {
  int threads = 0;
  std::vector<ComputeFigure> compute;
  std::vector<BandwidthFigure> bandwidth;

  // The figure named `name`, or null.
  const ComputeFigure* Find(const std::string& name) const;
  // The higher of the 4 KiB and huge-page bandwidths, or null when none
  // was measured.
  const BandwidthFigure* BestBandwidth() const;
};

// The instruction-set level the roofline's loops are chosen for (the
// best ISA and the extensions that add or drop a loop: "avx512+vnni+bf16
// +amx", "avx2+avx-vnni", ...), as KILN_ISA and KILN_AMX leave it: each
// level gets its own cache entry.
std::string RooflineIsaLevel();

struct Roofline {
  std::string cpu_model;  // the cache key, with isa and threads
  std::string isa;        // RooflineIsaLevel()
  std::string cpu_summary;
  std::string thp_setting;
  std::string stream_instructions;
  std::string measured_at;  // UTC, ISO 8601
  int repetitions = 0;
  std::vector<RooflineRow> rows;

  const RooflineRow* AtThreads(int threads) const;
  nlohmann::ordered_json ToJson() const;
  static Expected<Roofline> FromJson(const nlohmann::json& j);
};

// Measures every thread count of `options` on this machine.
Expected<Roofline> MeasureRoofline(const RooflineOptions& options);

// What a model's figures are compared with: the rate, which figure it is,
// and why that one.
struct PeakChoice {
  double per_second = 0;
  std::string figure;  // e.g. "fp32_fma at 2 threads"
  std::string reason;
};

// The weights' arithmetic as the kernels run it.
enum class WeightArithmetic { kFp32, kBf16, kF16, kInt8 };
const char* WeightArithmeticName(WeightArithmetic a);

// The compute peak for weights of `arithmetic`: the fastest unit measured
// in `row` that can do that math, whether or not kiln's kernels run on it
// (fp32: the FMA units; bf16: the AMX tiles, vdpbf16ps or the FMA units on
// widened values; f16: the FMA units on widened values; int8: the AMX
// tiles, vpdpbusd, or vpmaddubsw + vpmaddwd). A zero rate when the row
// has none of them.
PeakChoice ComputePeak(const RooflineRow& row, WeightArithmetic arithmetic);

// The bandwidth peak: the better of the 4 KiB and huge-page streaming reads.
PeakChoice BandwidthPeak(const RooflineRow& row);

// $XDG_CACHE_HOME/kiln/roofline.json, else $HOME/.cache/kiln/roofline.json,
// else roofline.json in the working directory.
std::string DefaultRooflineCachePath();

// Merges the rows of `roofline` into the cache file at `path` (creating it
// and its folder), replacing entries of the same CPU, ISA and thread count.
Status SaveRooflineCache(const std::string& path, const Roofline& roofline);

// The cached measurement of this CPU and ISA at `threads`, as a Roofline
// of one row. NotFound when the file or the entry is missing; Corrupt (with
// the path) when the file is not a roofline cache.
Expected<Roofline> LoadRooflineCache(const std::string& path, int threads);

// The cached row for `threads`, or, when absent, a short measurement of
// that thread count (ShortRooflineOptions) that is then cached.
// `on_progress` receives progress lines.
Expected<Roofline> LoadOrMeasureRoofline(const std::string& cache_path, int threads,
                                         const std::function<void(const std::string&)>& on_progress);

// The short measurement benchmarks take before their runs: `threads` only,
// 3 repetitions of 0.1 s a compute unit, the full bandwidth buffer.
RooflineOptions ShortRooflineOptions(int threads, const std::function<void(const std::string&)>& on_progress);

// Measures `o` now, whatever the cache holds, and merges the result into
// the cache at `cache_path` (a failure to write it is reported through
// o.on_progress, not returned): what a benchmark uses when the cached
// figures may be stale, as a shared host's limits move between runs.
Expected<Roofline> MeasureAndCacheRoofline(const std::string& cache_path, const RooflineOptions& o);

// The terminal table: one line per figure and thread count, with the
// contention marks, then which figures the other modes use as peaks.
std::string FormatRooflineTable(const Roofline& roofline);

// "12.3 GFLOP/s", "25.1 GB/s": a rate in engineering units.
std::string FormatRate(double per_second, const std::string& unit);

}  // namespace kiln::bench
