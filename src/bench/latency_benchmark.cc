// The latency benchmark: one engine, runs of B requests driven step by step.
#include "bench/latency_benchmark.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "bench/text_table.h"
#include "bench/throughput_benchmark.h"
#include "compiler/compiled_model.h"
#include "format/artifact_file.h"
#include "engine/llm_engine.h"
#include "engine/model_loader.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln::bench {
namespace {

// Peak resident memory so far (VmHWM), in bytes; 0 when unknown.
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

// Restarts VmHWM from the current resident size, so that each batch size
// reports its own peak. Harmless where the kernel does not allow it.
void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

// Times of one run, seconds from its start.
struct RunTimes {
  std::vector<double> first_token;   // per request
  double prefill = 0;                // the last first token
  std::vector<double> decode_steps;  // intervals of the passes after `prefill`
  double end = 0;
};

Expected<RunTimes> RunOnce(LLMEngine& engine, const LatencyOptions& o, int32_t batch,
                           const std::string& json_schema, int32_t vocab, std::mt19937_64& rng) {
  const int32_t input_len = o.input_len, output_len = o.output_len;
  // Every time is taken when a pass returns: a token is delivered (its
  // callback runs) just before that, within the same pass.
  RunTimes t;
  t.first_token.assign(static_cast<size_t>(batch), -1);
  std::vector<char> got_token(static_cast<size_t>(batch), 0);
  int32_t short_outputs = 0;  // requests ended before output_len (by a grammar)
  const double start = EngineClock();
  for (int32_t b = 0; b < batch; ++b) {
    GenerationRequest r;
    r.prompt_ids.resize(static_cast<size_t>(input_len));
    for (int32_t& id : r.prompt_ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    if (o.repeated_prompt) {
      const size_t half = static_cast<size_t>(input_len / 2);
      std::copy(r.prompt_ids.begin(), r.prompt_ids.begin() + half, r.prompt_ids.begin() + half);
    }
    r.params.temperature = o.temperature;
    r.params.ignore_eos = true;
    r.params.max_tokens = output_len;
    r.params.seed = rng();
    r.params.json_schema = json_schema;
    r.on_token = [&got_token, &short_outputs, output_len, b](const TokenEvent& e) {
      if (e.token >= 0) got_token[static_cast<size_t>(b)] = 1;
      if (e.finished && e.stats->completion_tokens < output_len) ++short_outputs;
    };
    KILN_RETURN_IF_ERROR(engine.AddRequest(std::move(r)).status());
  }
  int32_t started = 0;  // requests with a first token
  double last_end = 0;
  while (engine.HasUnfinishedRequests()) {
    const bool all_started = started == batch;
    KILN_RETURN_IF_ERROR(engine.Step());
    const double now = EngineClock() - start;
    for (int32_t b = 0; b < batch && !all_started; ++b) {
      if (got_token[static_cast<size_t>(b)] && t.first_token[static_cast<size_t>(b)] < 0) {
        t.first_token[static_cast<size_t>(b)] = now;
        ++started;
      }
    }
    if (all_started) t.decode_steps.push_back(now - last_end);
    if (!all_started && started == batch) t.prefill = now;
    last_end = now;
  }
  t.end = last_end;
  if (started != batch) return Internal("latency: {} of {} requests produced no token", batch - started, batch);
  if (short_outputs > 0) {
    return InvalidArgument("latency: the JSON schema ended {} of {} requests before {} tokens; give a schema whose "
                           "output is longer (a long minItems, say)",
                           short_outputs, batch, output_len);
  }
  return t;
}

std::string Seconds(double s) {
  if (s <= 0) return "-";
  if (s < 1e-3) return fmt::format("{:.0f} µs", s * 1e6);
  if (s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string Rate(double r) {
  return r > 0 ? fmt::format("{:.1f}", r) : "-";
}

std::string Percent(double share) {
  return share > 0 ? fmt::format("{:.0f}%", 100 * share) : "-";
}

nlohmann::ordered_json Peak(const PeakChoice& c, double achieved) {
  nlohmann::ordered_json j;
  j["achieved_per_s"] = achieved;
  j["peak_per_s"] = c.per_second;
  j["fraction"] = c.per_second > 0 ? achieved / c.per_second : 0;
  j["peak_figure"] = c.figure;
  j["why_this_peak"] = c.reason;
  return j;
}

}  // namespace

Expected<LatencyReport> RunLatencyBenchmark(const LatencyOptions& o,
                                            const std::function<void(const LatencyProgress&)>& on_progress) {
  if (o.input_len < 1 || o.output_len < 1) {
    return InvalidArgument("latency: --input-len {} and --output-len {} must be positive", o.input_len, o.output_len);
  }
  if (o.batch_sizes.empty()) return InvalidArgument("latency: no batch size");
  for (int32_t b : o.batch_sizes) {
    if (b < 1 || b > 4096) return InvalidArgument("latency: batch size {} outside [1, 4096]", b);
  }
  if (!(o.temperature >= 0)) return InvalidArgument("latency: --temperature {} must be >= 0", o.temperature);
  if (o.runs < 1 || o.warmup < 0 || o.runs > 100000 || o.warmup > 100000) {
    return InvalidArgument("latency: --runs {} must be positive and --warmup {} not negative", o.runs, o.warmup);
  }
  LatencyReport report;
  report.options = o;
  EngineOptions eo = o.engine;
  const int32_t max_batch = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  // A compiled artifact runs with the sizes it was compiled for.
  const bool compiled = IsArtifactFile(eo.model);
  if (compiled && eo.max_num_seqs < max_batch) {
    return InvalidArgument("latency: batch size {} exceeds the artifact's --max-num-seqs {}; compile it with more",
                           max_batch, eo.max_num_seqs);
  }
  if (!compiled) eo.max_num_seqs = max_batch;
  eo.enable_prefix_caching = false;
  const int64_t context = static_cast<int64_t>(o.input_len) + o.output_len;
  if (eo.max_model_len == 0 && !compiled) {
    eo.max_model_len = static_cast<int32_t>(std::min<int64_t>(context, INT32_MAX));
  }
  if (eo.max_model_len < context && !(compiled && eo.max_model_len == 0)) {
    return InvalidArgument("latency: input {} + output {} tokens exceed --max-model-len {}", o.input_len,
                           o.output_len, eo.max_model_len);
  }

  KILN_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(eo));
  const ModelConfig config = model.weights->config();
  if (context > config.max_position_embeddings && config.max_position_embeddings > 0) {
    return InvalidArgument("latency: input {} + output {} tokens exceed the model's context of {}", o.input_len,
                           o.output_len, config.max_position_embeddings);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LLMEngine> engine, LLMEngine::Create(model, eo));
  report.figures = DescribeModel(engine->compiled_model(), eo.kv_cache_dtype);
  report.model = eo.load_format == "dummy" && !eo.preset.empty()
                     ? fmt::format("{} shapes, generated {} weights", eo.preset, DTypeName(eo.dummy_dtype))
                     : eo.model;
  const int32_t vocab = static_cast<int32_t>(std::min<int64_t>(config.vocab_size, INT32_MAX));

  std::mt19937_64 rng(o.seed);
  ContentionSampler sampler(o.contention);
  for (int32_t batch : o.batch_sizes) {
    LatencyRow row;
    row.batch_size = batch;
    row.runs = o.runs;
    std::vector<double> ttft, prefill, decode_steps, decode_time, e2e, free_steps, ratios;
    ResetPeakRss();
    ContentionSampler::Point measured_from;
    EngineCounters counters_from;
    for (int32_t r = 0; r < o.warmup + o.runs; ++r) {
      const bool warmup = r < o.warmup;
      if (r == o.warmup) {
        measured_from = sampler.Now();
        counters_from = engine->Counters();
      }
      // Paired runs take the same prompts and seeds, the unconstrained one
      // first on even runs and second on odd ones.
      const bool paired = o.compare_unconstrained && !warmup;
      std::mt19937_64 same = rng;
      RunTimes u;
      if (paired && r % 2 == 0) {
        KILN_ASSIGN_OR_RETURN(u, RunOnce(*engine, o, batch, "", vocab, same));
      }
      KILN_ASSIGN_OR_RETURN(RunTimes t, RunOnce(*engine, o, batch, o.json_schema, vocab, rng));
      if (paired && r % 2 != 0) {
        KILN_ASSIGN_OR_RETURN(u, RunOnce(*engine, o, batch, "", vocab, same));
      }
      if (on_progress) on_progress({batch, r + 1, o.warmup + o.runs, warmup, t.end});
      if (warmup) continue;
      if (paired) {
        free_steps.insert(free_steps.end(), u.decode_steps.begin(), u.decode_steps.end());
        const double constrained = Summarize(t.decode_steps).median, free = Summarize(u.decode_steps).median;
        if (free > 0) ratios.push_back(constrained / free);
      }
      ttft.insert(ttft.end(), t.first_token.begin(), t.first_token.end());
      prefill.push_back(t.prefill);
      decode_steps.insert(decode_steps.end(), t.decode_steps.begin(), t.decode_steps.end());
      if (!t.decode_steps.empty()) decode_time.push_back(t.end - t.prefill);
      e2e.push_back(t.end);
    }
    row.contention = sampler.Since(measured_from);
    const EngineCounters counters_to = engine->Counters();
    row.spec.verifications = counters_to.spec_verifications - counters_from.spec_verifications;
    row.spec.draft_tokens = counters_to.spec_draft_tokens - counters_from.spec_draft_tokens;
    row.spec.accepted_tokens = counters_to.spec_accepted_tokens - counters_from.spec_accepted_tokens;
    row.spec.draft_seconds = counters_to.spec_draft_seconds - counters_from.spec_draft_seconds;
    row.spec.pass_seconds = (counters_to.prefill_seconds + counters_to.decode_seconds) -
                            (counters_from.prefill_seconds + counters_from.decode_seconds);
    row.peak_rss_bytes = PeakRssBytes();

    const double prompt_tokens = static_cast<double>(batch) * o.input_len;
    const double decode_tokens = static_cast<double>(batch) * (o.output_len - 1);
    row.ttft_s = Summarize(ttft);
    row.prefill_s = Summarize(prefill);
    row.prefill_tokens_per_s = RateSummary(prompt_tokens, prefill);
    row.tpot_s = Summarize(decode_steps);
    row.decode_tokens_per_s = RateSummary(decode_tokens, decode_time);
    row.e2e_s = Summarize(e2e);
    if (o.compare_unconstrained) {
      row.unconstrained_tpot_s = Summarize(free_steps);
      row.tpot_ratio = Summarize(ratios);
    }

    // A mixture's decode step reads only the experts its tokens choose.
    row.weight_bytes_per_step = static_cast<int64_t>(std::llround(report.figures.WeightBytesPerStep(batch)));
    // Decode passes feed positions input_len .. input_len + output_len - 2,
    // attending to one more token each: a mean context of input_len + output_len / 2.
    const double mean_context = o.input_len + o.output_len / 2.0;
    row.kv_bytes_per_step = batch * mean_context * report.figures.kv_bytes_per_token;
    if (row.tpot_s.median > 0) {
      row.decode_bytes_per_s = (static_cast<double>(row.weight_bytes_per_step) + row.kv_bytes_per_step) / row.tpot_s.median;
    }
    const double request_prefill_flops = RequestFlops(config, o.input_len, 1);
    row.prefill_flops = batch * request_prefill_flops;
    if (row.prefill_s.median > 0) row.prefill_flops_per_s = row.prefill_flops / row.prefill_s.median;
    if (o.output_len > 1) {
      row.decode_flops_per_step =
          batch * (RequestFlops(config, o.input_len, o.output_len) - request_prefill_flops) / (o.output_len - 1);
      if (row.tpot_s.median > 0) row.decode_flops_per_s = row.decode_flops_per_step / row.tpot_s.median;
    }
    report.rows.push_back(std::move(row));
  }
  return report;
}

LatencyShares SharesOf(const LatencyRow& row, const ModelFigures& figures, const RooflineRow* roofline) {
  LatencyShares s;
  if (roofline == nullptr) return s;
  s.compute = ComputePeak(*roofline, figures.arithmetic);
  s.bandwidth = BandwidthPeak(*roofline);
  if (s.compute.per_second > 0) {
    s.prefill_of_compute = row.prefill_flops_per_s / s.compute.per_second;
    s.decode_of_compute = row.decode_flops_per_s / s.compute.per_second;
  }
  if (s.bandwidth.per_second > 0) s.decode_of_bandwidth = row.decode_bytes_per_s / s.bandwidth.per_second;
  return s;
}

std::string FormatLatencyTable(const LatencyReport& report, const RooflineRow* roofline) {
  const LatencyOptions& o = report.options;
  std::string out = fmt::format("{}: input {} tokens, output {} tokens; {} warm-up + {} measured runs per batch size\n",
                                report.model, o.input_len, o.output_len, o.warmup, o.runs);
  out += fmt::format("weights: {:.1f} MiB packed ({}), {} matrices; {} threads; KV cache {}\n",
                     static_cast<double>(report.figures.weight_bytes) / (1 << 20), report.figures.layouts,
                     report.figures.matrices, report.figures.threads, DTypeName(o.engine.kv_cache_dtype));
  if (report.figures.expert_bytes > 0) {
    out += fmt::format("experts: {:.1f} MiB of those, {:.1f}% of them read per token; a step's weight bytes count "
                       "the experts its batch is expected to choose\n",
                       static_cast<double>(report.figures.expert_bytes) / (1 << 20),
                       100.0 * report.figures.experts_per_token_share);
  }
  if (!o.json_schema.empty()) out += "Every output constrained by the given JSON schema.\n";
  if (o.repeated_prompt) out += "Every prompt a random run of tokens said twice.\n";
  if (o.temperature != 0.6) out += fmt::format("Sampled at temperature {}.\n", o.temperature);
  const bool speculative = o.engine.spec_method != "none";
  if (speculative) {
    out += fmt::format(
        "Speculative decoding by {}, up to {} draft tokens{}; TPOT is per decode pass, which may "
        "yield several tokens.\n",
        o.engine.spec_method, o.engine.spec_tokens, o.engine.spec_adaptive ? " (adaptive)" : "");
  }
  out += "Rates' p90/p99 are the slow tail. TPOT is over decode passes once every prompt is done.\n\n";

  TextTable latency({"batch", "TTFT p50", "p90", "p99", "prefill tok/s", "p90", "p99", "TPOT p50", "p90", "p99",
                     "decode tok/s", "p90", "p99", "peak RSS", "note"});
  for (const LatencyRow& r : report.rows) {
    latency.AddRow({std::to_string(r.batch_size), Seconds(r.ttft_s.median), Seconds(r.ttft_s.p90),
                    Seconds(r.ttft_s.p99), Rate(r.prefill_tokens_per_s.median), Rate(r.prefill_tokens_per_s.p90),
                    Rate(r.prefill_tokens_per_s.p99), Seconds(r.tpot_s.median), Seconds(r.tpot_s.p90),
                    Seconds(r.tpot_s.p99), Rate(r.decode_tokens_per_s.median), Rate(r.decode_tokens_per_s.p90),
                    Rate(r.decode_tokens_per_s.p99), fmt::format("{:.0f} MiB", static_cast<double>(r.peak_rss_bytes) / (1 << 20)),
                    r.contention.Mark()});
  }
  out += latency.ToString();
  if (speculative) {
    out += "\nSpeculative decoding over the measured runs:\n";
    TextTable spec({"batch", "verification passes", "draft tokens", "accepted", "acceptance rate",
                    "accepted per pass", "drafting", "target passes", "drafting share"});
    for (const LatencyRow& r : report.rows) {
      const double total = r.spec.draft_seconds + r.spec.pass_seconds;
      spec.AddRow({std::to_string(r.batch_size), std::to_string(r.spec.verifications),
                   std::to_string(r.spec.draft_tokens), std::to_string(r.spec.accepted_tokens),
                   fmt::format("{:.1f}%", 100 * r.spec.acceptance_rate()),
                   fmt::format("{:.2f}", r.spec.accepted_per_pass()),
                   fmt::format("{:.3f} s", r.spec.draft_seconds),
                   fmt::format("{:.3f} s", r.spec.pass_seconds),
                   total > 0 ? fmt::format("{:.1f}%", 100 * r.spec.draft_seconds / total) : "-"});
    }
    out += spec.ToString();
  }
  if (o.compare_unconstrained) {
    out += "\nThe constraint's cost, each measured run paired with the same run unconstrained:\n";
    TextTable pairs({"batch", "TPOT p50 constrained", "unconstrained", "constrained / unconstrained, per pair: p50",
                     "p90", "max"});
    for (const LatencyRow& r : report.rows) {
      pairs.AddRow({std::to_string(r.batch_size), Seconds(r.tpot_s.median), Seconds(r.unconstrained_tpot_s.median),
                    fmt::format("{:.3f}", r.tpot_ratio.median), fmt::format("{:.3f}", r.tpot_ratio.p90),
                    fmt::format("{:.3f}", r.tpot_ratio.max)});
    }
    out += pairs.ToString();
  }

  out += "\n";
  TextTable roof({"batch", "bytes/decode pass", "decode GB/s", "of bandwidth", "decode GFLOP/s", "of compute",
                  "prefill GFLOP/s", "of compute", "note"});
  PeakChoice compute, bandwidth;
  for (const LatencyRow& r : report.rows) {
    LatencyShares s = SharesOf(r, report.figures, roofline);
    compute = s.compute;
    bandwidth = s.bandwidth;
    roof.AddRow({std::to_string(r.batch_size),
                 fmt::format("{:.1f} MiB", (static_cast<double>(r.weight_bytes_per_step) + r.kv_bytes_per_step) / (1 << 20)),
                 fmt::format("{:.2f}", r.decode_bytes_per_s / 1e9), Percent(s.decode_of_bandwidth),
                 fmt::format("{:.1f}", r.decode_flops_per_s / 1e9), Percent(s.decode_of_compute),
                 fmt::format("{:.1f}", r.prefill_flops_per_s / 1e9), Percent(s.prefill_of_compute),
                 r.contention.Mark()});
  }
  out += roof.ToString();
  out += report.figures.expert_bytes > 0
             ? "bytes/decode pass: every packed weight matrix (LM head included) but the experts, the experts the "
               "batch is expected to choose, and the KV cache read at the mean context.\n"
             : "bytes/decode pass: every packed weight matrix (LM head included) plus the KV cache read at the mean "
               "context.\n";
  if (roofline == nullptr) {
    out += "No roofline for this thread count: fractions not shown.\n";
  } else {
    if (!bandwidth.figure.empty()) {
      out += fmt::format("bandwidth peak: {} = {} ({})\n", bandwidth.figure, FormatRate(bandwidth.per_second, "B/s"),
                         bandwidth.reason);
    }
    if (!compute.figure.empty()) {
      out += fmt::format("compute peak for {} weights: {} = {} ({})\n", WeightArithmeticName(report.figures.arithmetic),
                         compute.figure,
                         FormatRate(compute.per_second,
                                    report.figures.arithmetic == WeightArithmetic::kInt8 ? "OP/s" : "FLOP/s"),
                         compute.reason);
    }
  }
  return out;
}

nlohmann::ordered_json LatencyJson(const LatencyReport& report, const RooflineRow* roofline) {
  const LatencyOptions& o = report.options;
  nlohmann::ordered_json j;
  j["mode"] = "latency";
  j["model"] = report.model;
  j["settings"] = {{"input_len", o.input_len},
                   {"output_len", o.output_len},
                   {"batch_sizes", o.batch_sizes},
                   {"warmup", o.warmup},
                   {"runs", o.runs},
                   {"seed", o.seed},
                   {"json_schema", o.json_schema.empty() ? nlohmann::ordered_json()
                                                         : nlohmann::ordered_json::parse(o.json_schema)},
                   {"temperature", o.temperature},
                   {"repeated_prompt", o.repeated_prompt},
                   {"spec_method", o.engine.spec_method},
                   {"spec_tokens", o.engine.spec_tokens},
                   {"spec_adaptive", o.engine.spec_adaptive},
                   {"spec_max_batch", o.engine.spec_max_batch},
                   {"max_num_batched_tokens", o.engine.max_num_batched_tokens},
                   {"kv_cache_dtype", DTypeName(o.engine.kv_cache_dtype)}};
  j["weights"] = {{"bytes", report.figures.weight_bytes},
                  {"expert_bytes", report.figures.expert_bytes},
                  {"experts_per_token_share", report.figures.experts_per_token_share},
                  {"matrices", report.figures.matrices},
                  {"layouts", report.figures.layouts},
                  {"arithmetic", WeightArithmeticName(report.figures.arithmetic)},
                  {"kv_bytes_per_token", report.figures.kv_bytes_per_token}};
  j["threads"] = report.figures.threads;
  j["results"] = nlohmann::ordered_json::array();
  for (const LatencyRow& r : report.rows) {
    LatencyShares s = SharesOf(r, report.figures, roofline);
    nlohmann::ordered_json row;
    row["batch_size"] = r.batch_size;
    row["runs"] = r.runs;
    row["ttft_s"] = ToJson(r.ttft_s);
    row["prefill_s"] = ToJson(r.prefill_s);
    row["prefill_tokens_per_s"] = ToJson(r.prefill_tokens_per_s);
    row["tpot_s"] = ToJson(r.tpot_s);
    row["decode_tokens_per_s"] = ToJson(r.decode_tokens_per_s);
    row["e2e_s"] = ToJson(r.e2e_s);
    if (o.compare_unconstrained) {
      row["unconstrained_tpot_s"] = ToJson(r.unconstrained_tpot_s);
      row["tpot_ratio_per_pair"] = ToJson(r.tpot_ratio);
    }
    row["peak_rss_bytes"] = r.peak_rss_bytes;
    row["weight_bytes_per_decode_step"] = r.weight_bytes_per_step;
    row["kv_bytes_per_decode_step"] = r.kv_bytes_per_step;
    row["decode_bandwidth"] = Peak(s.bandwidth, r.decode_bytes_per_s);
    row["decode_flops"] = Peak(s.compute, r.decode_flops_per_s);
    row["prefill_flops"] = Peak(s.compute, r.prefill_flops_per_s);
    row["contention"] = r.contention.ToJson();
    if (o.engine.spec_method != "none") {
      row["speculation"] = {
          {"verifications", r.spec.verifications},           {"draft_tokens", r.spec.draft_tokens},
          {"accepted_tokens", r.spec.accepted_tokens},       {"acceptance_rate", r.spec.acceptance_rate()},
          {"accepted_per_pass", r.spec.accepted_per_pass()}, {"draft_seconds", r.spec.draft_seconds},
          {"target_pass_seconds", r.spec.pass_seconds}};
    }
    j["results"].push_back(std::move(row));
  }
  return j;
}

}  // namespace kiln::bench
