// `kiln bench`: measurement of this machine and of kiln on it. Modes:
// roofline (the machine's limits, cached), latency (one batch at a time),
// throughput (many requests at once, offline) and serve (an HTTP load
// generator for any OpenAI-compatible server). Each prints a table, and
// writes JSON and an SVG chart on request; every figure taken while other
// processes used the CPU is marked.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/startup_benchmark.h"
#include "bench/charts.h"
#include "bench/latency_benchmark.h"
#include "bench/model_figures.h"
#include "bench/output.h"
#include "bench/roofline.h"
#include "bench/serve_benchmark.h"
#include "bench/svg_chart.h"
#include "bench/throughput_report.h"
#include "cli/bench_onnx.h"
#include "cli/backend_plugin_flag.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/inspect_onnx.h"
#include "cli/profile_flags.h"
#include "compiler/profiler.h"
#include "core/cpu_info.h"
#include "core/mapped_file.h"
#include "format/model_config.h"
#include "format/presets.h"

namespace kiln::cli {
namespace {

using bench::Progress;

// Output flags every mode has.
struct OutputArgs {
  std::string json;
  std::string chart;
  double contention_threshold = 0.1;
  std::string roofline_cache = bench::DefaultRooflineCachePath();
  bool no_roofline = false;
  bool fresh_roofline = false;
};

void AddOutputFlags(CLI::App* cmd, OutputArgs* a, bool chart, bool roofline) {
  cmd->add_option("--json", a->json, "Write the results as JSON to FILE");
  if (chart) cmd->add_option("--chart", a->chart, "Write an SVG chart of latency and throughput to FILE");
  cmd->add_option("--contention-threshold", a->contention_threshold,
                  "Mark figures taken while other processes used more than this many cores")
      ->capture_default_str();
  if (roofline) {
    cmd->add_option("--roofline-cache", a->roofline_cache, "The roofline cache (written by `kiln bench roofline`)")
        ->capture_default_str();
    cmd->add_flag("--no-roofline", a->no_roofline,
                  "Do not measure the roofline when the cache lacks it (fractions are then not shown)");
    cmd->add_flag(
        "--fresh-roofline", a->fresh_roofline,
        "Measure the roofline at the run's thread count now (a few seconds) and cache it, rather than "
        "use the cached figures: a shared host's limits can move between runs");
  }
}

Status WriteOutputs(const OutputArgs& a, const std::string& mode, nlohmann::ordered_json json,
                    const bench::Chart* chart) {
  if (!a.json.empty()) {
    nlohmann::ordered_json doc;
    doc["run"] = bench::RunInfoJson();
    for (auto& [key, value] : json.items()) doc[key] = value;
    KILN_RETURN_IF_ERROR(bench::WriteTextFile(a.json, doc.dump(2) + "\n"));
    fmt::print(stderr, "wrote {}\n", a.json);
  }
  if (!a.chart.empty() && chart != nullptr) {
    KILN_RETURN_IF_ERROR(bench::WriteTextFile(a.chart, bench::RenderSvg(*chart)));
    fmt::print(stderr, "wrote {}\n", a.chart);
  }
  return Status::Ok();
}

// The engine options, defaulting to Qwen2.5-0.5B's shapes with generated
// weights when no model is named; --preset alone implies generated weights.
Expected<EngineOptions> ResolveModel(EngineFlags flags) {
  EngineOptions& o = flags.options;
  if (o.model.empty() && o.preset.empty()) {
    o.load_format = "dummy";
    o.preset = "qwen2.5-0.5b";
    fmt::print(stderr, "no model given: generated weights of qwen2.5-0.5b's shapes (--preset)\n");
  }
  if (o.model.empty() && !o.preset.empty()) o.load_format = "dummy";
  return flags.Resolve();
}

std::string ModelDescription(const EngineOptions& o) {
  if (o.load_format == "dummy" && !o.preset.empty()) {
    return fmt::format("{} shapes, generated {} weights", o.preset, DTypeName(o.dummy_dtype));
  }
  if (o.load_format == "dummy") return fmt::format("{} shapes, generated {} weights", o.model, DTypeName(o.dummy_dtype));
  return o.model;
}

int EngineThreads(const EngineOptions& o) {
  return o.threads > 0 ? o.threads : std::max(1, GetCpuInfo().physical_cores);
}

// The roofline row at `threads`: measured now with --fresh-roofline, else
// from the cache, measured when absent (unless --no-roofline). Null when
// there is none; failures are reported, not fatal.
std::unique_ptr<bench::Roofline> RooflineFor(const OutputArgs& a, int threads, Progress& progress) {
  auto on_progress = [&](const std::string& line) { progress.Update(line, true); };
  if (a.fresh_roofline && a.no_roofline) {
    fmt::print(stderr, "--fresh-roofline and --no-roofline: fractions of the peak are not shown\n");
    return nullptr;
  }
  if (!a.fresh_roofline) {
    auto cached = bench::LoadRooflineCache(a.roofline_cache, threads);
    if (cached.ok()) {
      // Fractions are only as true as the peaks: say how old they are.
      fmt::print(stderr, "roofline: cached figures measured {} ({}); --fresh-roofline measures them now\n",
                 cached->measured_at, a.roofline_cache);
      return std::make_unique<bench::Roofline>(std::move(cached).value());
    }
    if (a.no_roofline) {
      fmt::print(stderr, "{}; --no-roofline: fractions of the peak are not shown\n",
                 cached.status().message());
      return nullptr;
    }
  }
  auto measured = a.fresh_roofline ? bench::MeasureAndCacheRoofline(
                                         a.roofline_cache, bench::ShortRooflineOptions(threads, on_progress))
                                   : bench::LoadOrMeasureRoofline(a.roofline_cache, threads, on_progress);
  progress.Done();
  if (!measured.ok()) {
    fmt::print(stderr, "roofline: {}\n", measured.status().ToString());
    return nullptr;
  }
  return std::make_unique<bench::Roofline>(std::move(measured).value());
}

std::string MachineLine() {
  return GetCpuInfo().Summary();
}

// --- roofline ---------------------------------------------------------------

struct RooflineArgs {
  OutputArgs out;
  std::vector<int> threads;
  int repetitions = 5;
  double seconds = 0.2;
  int64_t buffer_mib = 1024;
  bool no_cache = false;
};

Status RunRoofline(const RooflineArgs& a) {
  bench::RooflineOptions o;
  o.thread_counts = a.threads;
  o.repetitions = a.repetitions;
  o.seconds_per_repetition = a.seconds;
  if (a.buffer_mib < 4 || a.buffer_mib > (int64_t{1} << 20)) {
    return InvalidArgument("--buffer-mib {}: expected 4 .. 1048576", a.buffer_mib);
  }
  o.buffer_bytes = a.buffer_mib << 20;
  if (a.buffer_mib < 1024) {
    fmt::print(stderr, "note: a buffer under 1 GiB may be served partly from cache; figures are not representative\n");
  }
  Progress progress;
  o.on_progress = [&](const std::string& line) { progress.Update(line, true); };
  KILN_ASSIGN_OR_RETURN(bench::Roofline roofline, bench::MeasureRoofline(o));
  progress.Done();
  fmt::print("{}", bench::FormatRooflineTable(roofline));
  std::fflush(stdout);
  if (!a.no_cache) {
    KILN_RETURN_IF_ERROR(bench::SaveRooflineCache(a.out.roofline_cache, roofline));
    fmt::print(stderr, "cached in {}\n", a.out.roofline_cache);
  }
  nlohmann::ordered_json j;
  j["mode"] = "roofline";
  j["roofline"] = roofline.ToJson();
  return WriteOutputs(a.out, "roofline", std::move(j), nullptr);
}

void RegisterBenchRoofline(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "roofline",
      "Measure this machine's limits per thread count: fp32 FMA, bf16 and int8 dot products (or what kiln uses "
      "instead), and read bandwidth with 4 KiB and huge pages; cached for the other modes");
  auto args = std::make_shared<RooflineArgs>();
  AddOutputFlags(cmd, &args->out, false, false);
  cmd->add_option("--roofline-cache", args->out.roofline_cache, "Where to cache the results")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Thread counts, comma-separated (default: 1 .. physical cores)")
      ->delimiter(',');
  cmd->add_option("--repetitions", args->repetitions, "Repetitions per figure (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--seconds", args->seconds, "Seconds per compute repetition")->capture_default_str();
  cmd->add_option("--buffer-mib", args->buffer_mib, "Bandwidth buffer size in MiB (at least 1024 to defeat caches)")
      ->capture_default_str();
  cmd->add_flag("--no-cache", args->no_cache, "Do not write the cache");
  cmd->callback([args]() {
    Status s = RunRoofline(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln bench roofline: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

// --- latency ----------------------------------------------------------------

struct LatencyArgs {
  EngineFlags engine;
  OutputArgs out;
  bench::LatencyOptions options;
  std::string json_schema_file;
  OnnxBenchArgs onnx;  // -m MODEL.onnx
  ProfileFlags profiling;  // LLMs: over every run, warm-up runs included
};

Status RunLatency(const LatencyArgs& a) {
  if (IsOnnxModelPath(a.engine.options.model)) {
    KILN_RETURN_IF_ERROR(LoadBackendPlugins(a.engine.backend_plugins));
    OnnxBenchArgs o = a.onnx;
    o.model = a.engine.options.model;
    o.backend = a.engine.options.backend;
    o.precision = a.engine.precision;
    o.threads = a.engine.options.threads;
    o.recompile_if_stale = a.engine.options.recompile_if_stale;
    o.verify_weights = a.engine.options.verify_weights;
    o.warmup = a.options.warmup;
    o.runs = a.options.runs;
    o.json = a.out.json;
    Progress progress;
    const int threads = o.threads > 0 ? o.threads : std::max(1, GetCpuInfo().physical_cores);
    std::unique_ptr<bench::Roofline> roofline = RooflineFor(a.out, threads, progress);
    return RunOnnxLatency(o, roofline ? roofline->AtThreads(threads) : nullptr, MachineLine());
  }
  bench::LatencyOptions o = a.options;
  KILN_ASSIGN_OR_RETURN(o.engine, ResolveModel(a.engine));
  if (!a.json_schema_file.empty()) {
    auto schema = ReadFileToString(a.json_schema_file);
    if (!schema.ok()) return schema.status().WithContext("--json-schema");
    if (!nlohmann::json::accept(*schema)) return InvalidArgument("--json-schema {}: not JSON", a.json_schema_file);
    o.json_schema = *schema;
  }
  if (o.compare_unconstrained && o.json_schema.empty()) {
    return InvalidArgument("--compare-unconstrained needs --json-schema");
  }
  o.contention.threshold_cores = a.out.contention_threshold;
  Progress progress;
  std::unique_ptr<bench::Roofline> roofline = RooflineFor(a.out, EngineThreads(o.engine), progress);
  fmt::print(stderr, "{}; {}\n", ModelDescription(o.engine), MachineLine());
  StartProfiling(a.profiling);
  auto report = bench::RunLatencyBenchmark(o, [&](const bench::LatencyProgress& p) {
    progress.Update(fmt::format("batch {}: {} {}/{} took {:.2f} s", p.batch_size, p.warmup ? "warm-up run" : "run",
                                p.warmup ? p.run : p.run - o.warmup, p.warmup ? o.warmup : o.runs, p.seconds));
  });
  progress.Done();
  if (!report.ok()) {
    if (a.profiling.any()) EnableProfiling(false);
    return report.status();
  }
  const bench::RooflineRow* row = roofline ? roofline->AtThreads(report->figures.threads) : nullptr;
  fmt::print("{}", bench::FormatLatencyTable(*report, row));
  std::fflush(stdout);
  ProfileFlags profiling = a.profiling;
  profiling.roofline_cache = a.out.roofline_cache;
  profiling.no_roofline = a.out.no_roofline;
  KILN_RETURN_IF_ERROR(FinishProfiling(profiling, report->figures.threads, report->figures.arithmetic, stdout));
  nlohmann::ordered_json j = bench::LatencyJson(*report, row);
  if (roofline) j["roofline"] = roofline->ToJson();
  bench::Chart chart = bench::LatencyChart(*report, MachineLine());
  return WriteOutputs(a.out, "latency", std::move(j), &chart);
}

void RegisterBenchLatency(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "latency",
      "Batches of fixed-length random prompts through the engine: TTFT, prefill tokens/s, TPOT and decode "
      "tokens/s (median, p90, p99), peak memory, bytes and FLOPs against the roofline");
  auto args = std::make_shared<LatencyArgs>();
  AddEngineFlags(cmd, &args->engine);
  AddOutputFlags(cmd, &args->out, true, true);
  bench::LatencyOptions& o = args->options;
  cmd->add_option("--input-len", o.input_len, "Prompt tokens")->capture_default_str();
  cmd->add_option("--output-len", o.output_len, "Generated tokens")->capture_default_str();
  cmd->add_option("--batch-size", o.batch_sizes, "Prompts run together; several, comma-separated, for a sweep")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Unmeasured runs per batch size")->capture_default_str();
  cmd->add_option("--runs", o.runs, "Measured runs per batch size")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seeds the prompts and the sampling")->capture_default_str();
  cmd->add_option("--json-schema", args->json_schema_file,
                  "Constrain every output by this JSON Schema file (TPOT then includes the grammar masks); its output "
                  "must be longer than --output-len");
  const std::string onnx = "ONNX models (-m MODEL.onnx)";
  cmd->add_option("--input", args->onnx.inputs, "NAME=FILE.npy: a graph input (others: seeded random)")->group(onnx);
  cmd->add_option("--input-shape", args->onnx.input_shapes, "NAME:DIMS fixes an input's shape")->group(onnx);
  cmd->add_option("--fixed-input", args->onnx.fixed_inputs, "NAME: compile with this --input's value fixed")
      ->group(onnx);
  cmd->add_flag("--layers", args->onnx.layers, "Per-node times and GFLOP/s of the heavy nodes, and the time by op type")
      ->group(onnx);
  cmd->add_option("--layers-min-mflop", args->onnx.layers_min_mflop,
                  "With --layers: list the nodes of this many MFLOP or more")
      ->capture_default_str()
      ->group(onnx);
  cmd->add_option("--onnxruntime", args->onnx.onnxruntime,
                  "ort_run.js (tests/onnx_oracle/): run onnxruntime side by side, same inputs and threads")
      ->group(onnx);
  cmd->add_option("--temperature", o.temperature, "Sampling temperature of every request (0: greedy)")
      ->capture_default_str();
  cmd->add_flag("--repeated-prompt", o.repeated_prompt,
                "Each prompt a random run of tokens said twice (input-grounded: n-gram drafts find it)");
  cmd->add_flag("--compare-unconstrained", o.compare_unconstrained,
                "With --json-schema: pair each measured run with the same run unconstrained and report the TPOT ratio");
  AddProfileFlags(cmd, &args->profiling, /*with_profile=*/true, /*with_roofline=*/false);
  cmd->callback([args]() {
    Status s = RunLatency(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln bench latency: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

// --- throughput -------------------------------------------------------------

struct ThroughputArgs {
  EngineFlags engine;
  OutputArgs out;
  ThroughputOptions options;
  std::vector<int32_t> sweep = {1, 4, 16, 64};
  bool nano_vllm = false;
};

// The model's vocabulary size without loading its weights (0 when unknown).
int64_t VocabularySize(const EngineOptions& o) {
  if (o.load_format == "dummy" && !o.preset.empty()) {
    auto preset = PresetConfig(o.preset);
    return preset.ok() ? preset->vocab_size : 0;
  }
  auto config = ModelConfigFromHfFile(o.model + "/config.json");
  return config.ok() ? config->vocab_size : 0;
}

// The weights' arithmetic without loading them: the generated dtype, a
// config.json's torch_dtype, or a GGUF file's name.
bench::WeightArithmetic GuessArithmetic(const EngineOptions& o) {
  if (o.load_format == "dummy") return bench::ArithmeticOfDType(o.dummy_dtype);
  if (o.model.size() > 5 && o.model.substr(o.model.size() - 5) == ".gguf") return bench::ArithmeticOfLayout(o.model);
  auto config = ModelConfigFromHfFile(o.model + "/config.json");
  if (config.ok()) {
    if (auto dtype = DTypeFromName(config->torch_dtype)) return bench::ArithmeticOfDType(*dtype);
  }
  return bench::WeightArithmetic::kFp32;
}

Status RunThroughput(const ThroughputArgs& a) {
  bench::ThroughputReport report;
  ThroughputOptions& o = report.options;
  o = a.options;
  if (a.nano_vllm) {
    o.num_requests = 256;
    o.min_input_len = o.min_output_len = 100;
    o.max_input_len = o.max_output_len = 1024;
  }
  o.max_num_seqs = a.sweep;
  for (int32_t s : o.max_num_seqs) {
    if (s < 1) return InvalidArgument("--sweep: max-num-seqs {} must be positive", s);
  }
  KILN_ASSIGN_OR_RETURN(o.engine, ResolveModel(a.engine));
  if (o.max_token_id == 0) {
    const int64_t vocab = VocabularySize(o.engine);
    o.max_token_id = static_cast<int32_t>(vocab > 0 ? std::min<int64_t>(10000, vocab) : 10000);
  }
  report.model = ModelDescription(o.engine);
  report.arithmetic = GuessArithmetic(o.engine);

  Progress progress;
  std::unique_ptr<bench::Roofline> roofline = RooflineFor(a.out, EngineThreads(o.engine), progress);
  fmt::print(stderr, "{}; {}\n", report.model, MachineLine());
  bench::ContentionOptions contention;
  contention.threshold_cores = a.out.contention_threshold;
  bench::ContentionSampler sampler(contention);
  bench::ContentionSampler::Point row_start = sampler.Now();
  o.on_progress = [&](int32_t max_seqs, int64_t done, int64_t total) {
    if (done == 0) row_start = sampler.Now();  // the timed run starts
    progress.Update(fmt::format("max-num-seqs {}: {}/{} output tokens", max_seqs, done, total), done == 0);
  };
  auto rows = RunThroughputBenchmark(o, [&](const ThroughputRow& r) {
    report.contention.push_back(sampler.Since(row_start));
    progress.Update(fmt::format("max-num-seqs {}: {:.1f} output tokens/s ({:.2f} s)", r.max_num_seqs,
                                r.output_tokens_per_s, r.seconds),
                    true);
  });
  progress.Done();
  if (!rows.ok()) return rows.status();
  report.rows = std::move(rows).value();
  const int threads = report.rows.empty() ? EngineThreads(o.engine) : report.rows.front().threads;
  const bench::RooflineRow* row = roofline ? roofline->AtThreads(threads) : nullptr;
  fmt::print("{}", bench::FormatThroughputReport(report, row));
  std::fflush(stdout);
  nlohmann::ordered_json j = bench::ThroughputJson(report, row);
  if (roofline) j["roofline"] = roofline->ToJson();
  bench::Chart chart = bench::ThroughputChart(report, MachineLine());
  return WriteOutputs(a.out, "throughput", std::move(j), &chart);
}

void RegisterBenchThroughput(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "throughput",
      "Offline throughput (vLLM's and nano-vllm's method): N requests of random input and output lengths submitted "
      "at once, at several --max-num-seqs; output and total tokens/s");
  auto args = std::make_shared<ThroughputArgs>();
  AddEngineFlags(cmd, &args->engine);
  AddOutputFlags(cmd, &args->out, true, true);
  ThroughputOptions& o = args->options;
  cmd->add_option("--num-requests", o.num_requests, "Requests")->capture_default_str();
  cmd->add_option("--min-input", o.min_input_len, "Shortest prompt")->capture_default_str();
  cmd->add_option("--max-input", o.max_input_len, "Longest prompt")->capture_default_str();
  cmd->add_option("--min-output", o.min_output_len, "Fewest new tokens")->capture_default_str();
  cmd->add_option("--max-output", o.max_output_len, "Most new tokens")->capture_default_str();
  cmd->add_option("--sweep", args->sweep, "max-num-seqs settings, comma-separated (replaces --max-num-seqs)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seeds the requests")->capture_default_str();
  o.max_token_id = 0;
  cmd->add_option("--max-token-id", o.max_token_id,
                  "Prompt ids are drawn below this (default: 10000 or the vocabulary size if smaller)");
  cmd->add_flag("--nano-vllm", args->nano_vllm, "nano-vllm's workload: 256 requests, inputs and outputs of 100-1024");
  cmd->callback([args]() {
    Status s = RunThroughput(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln bench throughput: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

// --- serve ------------------------------------------------------------------

struct ServeArgs {
  OutputArgs out;
  bench::ServeOptions options;
  std::vector<int> server_pids;
  bool keep_eos = false;
};

Status RunServe(const ServeArgs& a) {
  bench::ServeOptions o = a.options;
  o.ignore_eos = !a.keep_eos;
  o.contention.threshold_cores = a.out.contention_threshold;
  for (int pid : a.server_pids) o.contention.exclude_pids.push_back(static_cast<pid_t>(pid));
  if (o.api_key.empty()) {
    if (const char* key = std::getenv("OPENAI_API_KEY")) o.api_key = key;
  }
  Progress progress;
  auto report = bench::RunServeBenchmark(o, [&](const bench::ServeProgress& p) {
    progress.Update(fmt::format("concurrency {}: {}/{} requests", p.concurrency, p.done, p.total), p.done == p.total);
  });
  progress.Done();
  if (!report.ok()) return report.status();
  fmt::print("{}", bench::FormatServeTable(*report));
  if (a.server_pids.empty()) {
    fmt::print("Contention counts every process but this one: a server on this machine counts as contention "
               "unless --server-pid names it.\n");
  }
  std::fflush(stdout);
  bench::Chart chart = bench::ServeChart(*report, MachineLine());
  Status written = WriteOutputs(a.out, "serve", bench::ServeJson(*report), &chart);
  KILN_RETURN_IF_ERROR(written);
  int64_t completed = 0;
  for (const bench::ServeLevel& l : report->levels) completed += l.completed;
  if (completed == 0) return Unsupported("no request succeeded (see the errors above)");
  return Status::Ok();
}

void RegisterBenchServe(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "serve",
      "Load an OpenAI-compatible server over HTTP (kiln's or another): streamed completions, closed-loop per "
      "concurrency level or Poisson arrivals; TTFT, TPOT, end-to-end latency, throughput, errors");
  auto args = std::make_shared<ServeArgs>();
  AddOutputFlags(cmd, &args->out, true, false);
  bench::ServeOptions& o = args->options;
  cmd->add_option("--url", o.url, "http://host:port, optionally with the endpoint path (default /v1/completions)")
      ->capture_default_str();
  cmd->add_option("--model", o.model, "The model name to send (default: the first of /v1/models)");
  cmd->add_option("--concurrency", o.concurrency, "Requests in flight at most, per level, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--request-rate", o.request_rate, "Poisson arrivals at this many requests/s (0: closed loop)")
      ->capture_default_str();
  cmd->add_option("--num-prompts", o.num_prompts, "Requests per level (0: max(16, 4 x concurrency))")
      ->capture_default_str();
  cmd->add_option("--input-len", o.input_len, "Words (or ids with --prompt-ids) per random prompt")
      ->capture_default_str();
  cmd->add_option("--output-len", o.output_len, "max_tokens per request")->capture_default_str();
  cmd->add_flag("--prompt-ids", o.prompt_ids, "Send random token ids as the prompt (models without a tokenizer)");
  cmd->add_option("--max-token-id", o.max_token_id, "With --prompt-ids: ids are drawn below this")
      ->capture_default_str();
  cmd->add_option("--prompts-file", o.prompts_file, "Prompts, one per line or JSON Lines with \"prompt\"");
  cmd->add_option("--seed", o.seed, "Seeds prompts and arrivals")->capture_default_str();
  cmd->add_option("--temperature", o.temperature, "Sampling temperature sent")->capture_default_str();
  cmd->add_flag("--no-ignore-eos", args->keep_eos, "Let the server stop at end-of-sequence tokens");
  cmd->add_option("--api-key", o.api_key, "Bearer token (default: $OPENAI_API_KEY)");
  cmd->add_option("--timeout", o.timeout_seconds, "Seconds a request may take")->capture_default_str();
  cmd->add_option("--server-pid", args->server_pids,
                  "A local server's process id, not counted as contention (repeat for several)");
  cmd->callback([args]() {
    Status s = RunServe(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln bench serve: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

void RegisterBenchStartup(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "startup",
      "Process start to first token of `kiln generate -n 1`, median of fresh processes, for each model side by "
      "side (a compiled .kiln artifact against its GGUF, say); the page cache warmed by one untimed run each");
  auto o = std::make_shared<bench::StartupOptions>();
  cmd->add_option("-m,--model", o->models, "A model as -m takes it (repeat for several)")->required();
  cmd->add_option("--runs", o->runs, "Timed runs per model")->capture_default_str();
  cmd->add_option("-p,--prompt", o->prompt, "The prompt")->capture_default_str();
  cmd->add_option("--threads", o->threads, "--threads for the runs (0: kiln's default)");
  cmd->add_option("--generate-arg", o->extra_args, "One more `kiln generate` argument for every run (repeatable)");
  cmd->add_flag("--serve", o->serve,
                "Time `kiln serve -m MODEL --port 0` to the line saying it is ready (then stop it) instead of "
                "generate to its first token");
  cmd->add_flag("--cold", o->cold,
                "Cold page cache: drop the model's files from it (posix_fadvise DONTNEED) before every run, and "
                "count what each run reads from storage");
  cmd->callback([o]() {
    std::error_code ec;
    o->kiln = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    auto results = bench::RunStartupBenchmark(*o);
    if (!results.ok()) {
      fmt::print(stderr, "kiln bench startup: {}\n", results.status().ToString());
      SetExitCode(1);
      return;
    }
    fmt::print("start-up to {}, {} runs each{}:\n{}", o->serve ? "ready (kiln serve)" : "the first token", o->runs,
               o->cold ? ", cold page cache" : "", bench::StartupTable(*results, o->serve));
  });
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto* bench = app.add_subcommand(
      "bench", "Measure the machine (roofline) and kiln on it (latency, throughput) or any OpenAI server (serve)");
  bench->require_subcommand(1);
  RegisterBenchRoofline(bench);
  RegisterBenchLatency(bench);
  RegisterBenchThroughput(bench);
  RegisterBenchServe(bench);
  RegisterBenchStartup(bench);
}

}  // namespace kiln::cli
