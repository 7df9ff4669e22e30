// Tables and JSON for the throughput sweep.
#include "bench/throughput_report.h"

#include <fmt/format.h>

#include "bench/text_table.h"

namespace kiln::bench {

double DecodeTokensPerSecond(const ThroughputRow& row) {
  return row.decode_seconds > 0 ? static_cast<double>(row.decode_tokens_computed) / row.decode_seconds : 0;
}

double PrefillTokensPerSecond(const ThroughputRow& row) {
  return row.prefill_seconds > 0 ? static_cast<double>(row.prefill_tokens_computed) / row.prefill_seconds : 0;
}

std::string FormatThroughputReport(const ThroughputReport& report, const RooflineRow* roofline) {
  const ThroughputOptions& o = report.options;
  std::string out = fmt::format(
      "{}: {} requests, inputs of {}-{} and outputs of {}-{} random tokens, all submitted at once\n", report.model,
      o.num_requests, o.min_input_len, o.max_input_len, o.min_output_len, o.max_output_len);
  if (!report.rows.empty()) {
    out += fmt::format("{} prompt tokens, {} output tokens, {} threads\n", report.rows[0].prompt_tokens,
                       report.rows[0].output_tokens, report.rows[0].threads);
  }
  out += "prefill and decode tok/s: the engine's passes of each kind (a mixed pass is split by tokens).\n\n";
  PeakChoice peak;
  if (roofline != nullptr) peak = ComputePeak(*roofline, report.arithmetic);
  TextTable table({"max-num-seqs", "seconds", "output tok/s", "total tok/s", "prefill tok/s", "decode tok/s",
                   "GFLOP/s", "of peak", "preemptions", "note"});
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ThroughputRow& r = report.rows[i];
    const std::string mark = i < report.contention.size() ? report.contention[i].Mark() : "";
    table.AddRow({std::to_string(r.max_num_seqs), fmt::format("{:.2f}", r.seconds),
                  fmt::format("{:.1f}", r.output_tokens_per_s), fmt::format("{:.1f}", r.total_tokens_per_s),
                  fmt::format("{:.1f}", PrefillTokensPerSecond(r)), fmt::format("{:.1f}", DecodeTokensPerSecond(r)),
                  fmt::format("{:.1f}", r.flops_per_s / 1e9),
                  peak.per_second > 0 ? fmt::format("{:.0f}%", 100 * r.flops_per_s / peak.per_second) : "-",
                  std::to_string(r.preemptions), mark});
  }
  out += table.ToString();
  if (!peak.figure.empty()) {
    out += fmt::format("compute peak for {} weights: {} = {} ({})\n", WeightArithmeticName(report.arithmetic),
                       peak.figure,
                       FormatRate(peak.per_second, report.arithmetic == WeightArithmetic::kInt8 ? "OP/s" : "FLOP/s"),
                       peak.reason);
  } else {
    out += "No roofline for this thread count: fractions not shown.\n";
  }
  for (const ThroughputRow& r : report.rows) {
    if (r.max_num_seqs == 1) {
      out += fmt::format(
          "At max-num-seqs 1 decode runs at {:.1f} tokens/s: `kiln bench latency --batch-size 1` measures the same "
          "passes.\n",
          DecodeTokensPerSecond(r));
    }
  }
  return out;
}

nlohmann::ordered_json ThroughputJson(const ThroughputReport& report, const RooflineRow* roofline) {
  const ThroughputOptions& o = report.options;
  nlohmann::ordered_json j;
  j["mode"] = "throughput";
  j["model"] = report.model;
  j["settings"] = {{"num_requests", o.num_requests},     {"min_input_len", o.min_input_len},
                   {"max_input_len", o.max_input_len},   {"min_output_len", o.min_output_len},
                   {"max_output_len", o.max_output_len}, {"max_num_seqs", o.max_num_seqs},
                   {"seed", o.seed},                     {"max_num_batched_tokens", o.engine.max_num_batched_tokens}};
  PeakChoice peak;
  if (roofline != nullptr) peak = ComputePeak(*roofline, report.arithmetic);
  j["compute_peak"] = {{"arithmetic", WeightArithmeticName(report.arithmetic)},
                       {"per_second", peak.per_second},
                       {"figure", peak.figure},
                       {"why", peak.reason}};
  j["results"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ThroughputRow& r = report.rows[i];
    nlohmann::ordered_json row;
    row["max_num_seqs"] = r.max_num_seqs;
    row["requests"] = r.requests;
    row["prompt_tokens"] = r.prompt_tokens;
    row["output_tokens"] = r.output_tokens;
    row["seconds"] = r.seconds;
    row["output_tokens_per_s"] = r.output_tokens_per_s;
    row["total_tokens_per_s"] = r.total_tokens_per_s;
    row["prefill_tokens_per_s"] = PrefillTokensPerSecond(r);
    row["decode_tokens_per_s"] = DecodeTokensPerSecond(r);
    row["prefill_seconds"] = r.prefill_seconds;
    row["decode_seconds"] = r.decode_seconds;
    row["model_flops"] = r.model_flops;
    row["flops_per_s"] = r.flops_per_s;
    row["fraction_of_compute_peak"] = peak.per_second > 0 ? r.flops_per_s / peak.per_second : 0;
    row["preemptions"] = r.preemptions;
    row["threads"] = r.threads;
    row["contention"] = i < report.contention.size() ? report.contention[i].ToJson() : nlohmann::ordered_json();
    j["results"].push_back(std::move(row));
  }
  return j;
}

}  // namespace kiln::bench
