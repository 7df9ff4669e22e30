// `kiln bench throughput`'s output: the engine's offline throughput sweep
// (bench/throughput_benchmark.h) with each setting's contention mark, its
// prefill and decode rates, and its FLOP/s against the measured roofline.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/contention.h"
#include "bench/roofline.h"
#include "bench/throughput_benchmark.h"

namespace kiln::bench {

struct ThroughputReport {
  ThroughputOptions options;
  std::string model;
  WeightArithmetic arithmetic = WeightArithmetic::kFp32;  // selects the compute peak
  std::vector<ThroughputRow> rows;
  std::vector<ContentionReading> contention;  // one per row
};

// Decode tokens per second of a row (the engine's decode passes only), or 0.
double DecodeTokensPerSecond(const ThroughputRow& row);
// Prefill tokens per second of a row (its prefill passes only), or 0.
double PrefillTokensPerSecond(const ThroughputRow& row);

std::string FormatThroughputReport(const ThroughputReport& report, const RooflineRow* roofline);
nlohmann::ordered_json ThroughputJson(const ThroughputReport& report, const RooflineRow* roofline);

}  // namespace kiln::bench
