// Mapping reports onto chart panels.
#include "bench/charts.h"

#include <fmt/format.h>

namespace kiln::bench {
namespace {

ChartPanel Panel(std::string title, std::string x_label, std::string y_label) {
  ChartPanel p;
  p.title = std::move(title);
  p.x_label = std::move(x_label);
  p.y_label = std::move(y_label);
  p.log2_x = true;
  return p;
}

}  // namespace

Chart LatencyChart(const LatencyReport& report, const std::string& machine) {
  Chart c;
  c.title = fmt::format("kiln bench latency: {}", report.model);
  c.subtitle = fmt::format("input {} / output {} tokens, {} runs per batch size (median and p90); {}",
                           report.options.input_len, report.options.output_len, report.options.runs, machine);
  ChartPanel ttft = Panel("Time to first token", "batch size", "ms");
  ChartPanel tpot = Panel("Time per output token", "batch size", "ms");
  ChartPanel rate = Panel("Throughput", "batch size", "tokens/s");
  ChartSeries ttft50{"TTFT p50", {}, false}, ttft90{"TTFT p90", {}, true};
  ChartSeries tpot50{"TPOT p50", {}, false}, tpot90{"TPOT p90", {}, true};
  ChartSeries prefill{"prefill tokens/s", {}, false}, decode{"decode tokens/s", {}, false};
  for (const LatencyRow& r : report.rows) {
    const double x = r.batch_size;
    const bool hot = r.contention.contended();
    ttft50.points.push_back({x, r.ttft_s.median * 1e3, hot});
    ttft90.points.push_back({x, r.ttft_s.p90 * 1e3, hot});
    tpot50.points.push_back({x, r.tpot_s.median * 1e3, hot});
    tpot90.points.push_back({x, r.tpot_s.p90 * 1e3, hot});
    prefill.points.push_back({x, r.prefill_tokens_per_s.median, hot});
    decode.points.push_back({x, r.decode_tokens_per_s.median, hot});
  }
  ttft.series = {ttft50, ttft90};
  tpot.series = {tpot50, tpot90};
  rate.series = {prefill, decode};
  c.panels = {ttft, tpot, rate};
  return c;
}

Chart ThroughputChart(const ThroughputReport& report, const std::string& machine) {
  Chart c;
  c.title = fmt::format("kiln bench throughput: {}", report.model);
  c.subtitle = fmt::format("{} requests, inputs {}-{}, outputs {}-{} tokens; {}", report.options.num_requests,
                           report.options.min_input_len, report.options.max_input_len, report.options.min_output_len,
                           report.options.max_output_len, machine);
  ChartPanel rate = Panel("Throughput", "max-num-seqs", "tokens/s");
  ChartPanel time = Panel("Time to finish all requests", "max-num-seqs", "s");
  ChartSeries output{"output tokens/s", {}, false}, total{"total tokens/s", {}, true};
  ChartSeries decode{"decode tokens/s", {}, false};
  ChartSeries seconds{"seconds", {}, false};
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ThroughputRow& r = report.rows[i];
    const bool hot = i < report.contention.size() && report.contention[i].contended();
    const double x = r.max_num_seqs;
    output.points.push_back({x, r.output_tokens_per_s, hot});
    total.points.push_back({x, r.total_tokens_per_s, hot});
    decode.points.push_back({x, DecodeTokensPerSecond(r), hot});
    seconds.points.push_back({x, r.seconds, hot});
  }
  rate.series = {output, total, decode};
  time.series = {seconds};
  c.panels = {rate, time};
  return c;
}

Chart ServeChart(const ServeReport& report, const std::string& machine) {
  Chart c;
  c.title = fmt::format("kiln bench serve: {}", report.endpoint);
  c.subtitle = fmt::format("model \"{}\", input {} / max output {} tokens, {}; {}", report.model,
                           report.options.input_len, report.options.output_len,
                           report.options.request_rate > 0 ? fmt::format("{:g} requests/s", report.options.request_rate)
                                                           : std::string("closed loop"),
                           machine);
  ChartPanel ttft = Panel("Time to first token", "concurrency", "ms");
  ChartPanel tpot = Panel("Time per output token", "concurrency", "ms");
  ChartPanel rate = Panel("Output throughput", "concurrency", "tokens/s");
  ChartSeries ttft50{"TTFT p50", {}, false}, ttft90{"TTFT p90", {}, true};
  ChartSeries tpot50{"TPOT p50", {}, false}, tpot90{"TPOT p90", {}, true};
  ChartSeries output{"output tokens/s", {}, false};
  for (const ServeLevel& l : report.levels) {
    const double x = l.concurrency;
    const bool hot = l.contention.contended();
    ttft50.points.push_back({x, l.ttft_s.median * 1e3, hot});
    ttft90.points.push_back({x, l.ttft_s.p90 * 1e3, hot});
    tpot50.points.push_back({x, l.tpot_s.median * 1e3, hot});
    tpot90.points.push_back({x, l.tpot_s.p90 * 1e3, hot});
    output.points.push_back({x, l.output_tokens_per_s, hot});
  }
  ttft.series = {ttft50, ttft90};
  tpot.series = {tpot50, tpot90};
  rate.series = {output};
  c.panels = {ttft, tpot, rate};
  return c;
}

}  // namespace kiln::bench
