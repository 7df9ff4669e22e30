// The charts of the latency, throughput and serve modes: latency and
// throughput against batch size, max-num-seqs or concurrency.
#pragma once

#include "bench/latency_benchmark.h"
#include "bench/serve_benchmark.h"
#include "bench/svg_chart.h"
#include "bench/throughput_report.h"

namespace kiln::bench {

// TTFT and TPOT (p50, p90) and prefill and decode tokens/s against batch size.
Chart LatencyChart(const LatencyReport& report, const std::string& machine);
// Output, total, prefill and decode tokens/s, and run time, against max-num-seqs.
Chart ThroughputChart(const ThroughputReport& report, const std::string& machine);
// TTFT, TPOT (p50, p90) and output tokens/s against concurrency.
Chart ServeChart(const ServeReport& report, const std::string& machine);

}  // namespace kiln::bench
