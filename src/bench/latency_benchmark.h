// `kiln bench latency`: batches of B random prompts of a fixed length run
// through the engine, timed pass by pass: prefill rate and time to first
// token, decode time per output token and rate, each as median, p90 and
// p99; peak memory; and what those times mean in bytes and FLOPs against
// the machine's roofline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/contention.h"
#include "bench/model_figures.h"
#include "bench/roofline.h"
#include "bench/statistics.h"
#include "core/status.h"
#include "engine/engine_options.h"

namespace kiln::bench {

struct LatencyOptions {
  // The model and engine. max_num_seqs becomes the largest batch size,
  // max_model_len (when 0) input_len + output_len, and prefix caching is
  // off so that every run computes its whole prompt.
  EngineOptions engine;
  int32_t input_len = 512;
  int32_t output_len = 128;
  std::vector<int32_t> batch_sizes = {1};
  int32_t warmup = 5;  // runs per batch size that are not measured
  int32_t runs = 20;   // measured runs per batch size
  uint64_t seed = 0;   // the prompts and the sampling
  double temperature = 0.6;  // as the throughput benchmark samples; 0: greedy
  // When set, every request's output is constrained by this JSON Schema
  // (its text), so that TPOT includes the grammar masks. The schema's
  // output must be longer than output_len: a request the grammar ends
  // early fails the run.
  std::string json_schema;
  // With json_schema: each run is paired with the same run unconstrained
  // (the order alternating), so that the constraint's cost is a ratio of
  // neighbouring runs, which a shared machine's drift hardly moves.
  bool compare_unconstrained = false;
  // Each prompt a random run of input_len / 2 tokens said twice (then one
  // more random token when input_len is odd): input-grounded text in
  // which prompt lookup (--spec-method ngram) finds its drafts.
  bool repeated_prompt = false;
  ContentionOptions contention;
};

// Speculative decoding over one batch size's measured runs, from the
// engine's counters.
struct SpecFigures {
  int64_t verifications = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double draft_seconds = 0;  // proposing drafts
  double pass_seconds = 0;   // the target's passes (prefill and decode)
  double acceptance_rate() const {
    return draft_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens) : 0;
  }
  double accepted_per_pass() const {
    return verifications > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(verifications) : 0;
  }
};

// Figures for one batch size. Rates' p90 and p99 are the slow tail (the
// rate at the 90th and 99th percentile of time).
struct LatencyRow {
  int32_t batch_size = 0;
  int32_t runs = 0;
  Summary ttft_s;                // each request's time to first token, over requests and runs
  Summary prefill_s;             // per run: until every prompt has its first token
  Summary prefill_tokens_per_s;  // per run: batch x input_len / prefill time
  Summary tpot_s;                // per decode pass once every prompt is done, over passes and runs
  Summary decode_tokens_per_s;   // per run: batch x (output_len - 1) / decode time
  Summary e2e_s;                 // per run
  // With compare_unconstrained: TPOT of the paired unconstrained runs, and
  // per pair the constrained run's median TPOT over the unconstrained one's.
  Summary unconstrained_tpot_s;
  Summary tpot_ratio;
  int64_t peak_rss_bytes = 0;    // VmHWM over this batch size's runs (the process's, if it cannot be reset)
  int64_t weight_bytes_per_step = 0;
  double kv_bytes_per_step = 0;     // mean over the decode passes
  double decode_bytes_per_s = 0;    // (weights + KV) per pass / median TPOT
  double prefill_flops = 0;         // per run
  double prefill_flops_per_s = 0;   // / median prefill time
  double decode_flops_per_step = 0; // mean
  double decode_flops_per_s = 0;    // / median TPOT
  ContentionReading contention;     // over the measured runs
  SpecFigures spec;                 // with a --spec-method
};

struct LatencyReport {
  LatencyOptions options;
  std::string model;  // what ran: a path, or a preset's shapes with generated weights
  ModelFigures figures;
  std::vector<LatencyRow> rows;
};

// Progress: called after each run, warm-up runs included.
struct LatencyProgress {
  int32_t batch_size = 0;
  int32_t run = 0;    // 1-based, warm-up runs first
  int32_t total = 0;  // warmup + runs
  bool warmup = false;
  double seconds = 0;
};

// Loads the model once, builds one engine for the largest batch size, and
// runs every batch size. Fails on non-positive lengths or counts, or a
// context (input_len + output_len) beyond the model's.
Expected<LatencyReport> RunLatencyBenchmark(const LatencyOptions& options,
                                            const std::function<void(const LatencyProgress&)>& on_progress = {});

// Fractions of the roofline (null: none known) for one row.
struct LatencyShares {
  PeakChoice compute;
  PeakChoice bandwidth;
  double prefill_of_compute = 0;
  double decode_of_bandwidth = 0;
  double decode_of_compute = 0;
};
LatencyShares SharesOf(const LatencyRow& row, const ModelFigures& figures, const RooflineRow* roofline);

// The terminal table (one row per batch size), the roofline comparison and
// the contention marks.
std::string FormatLatencyTable(const LatencyReport& report, const RooflineRow* roofline);

// The report as JSON (settings, model figures, one object per batch size
// with its summaries, roofline shares and contention).
nlohmann::ordered_json LatencyJson(const LatencyReport& report, const RooflineRow* roofline);

}  // namespace kiln::bench
