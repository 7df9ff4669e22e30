// kiln_bench_throughput: output tokens/s of N random requests served
// together at max-num-seqs 1, 4, 16 and 64, on generated weights of a
// published model's shapes (Qwen2.5-0.5B by default).
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/throughput_benchmark.h"
#include "cli/engine_flags.h"
#include "core/cpu_info.h"

int main(int argc, char** argv) {
  CLI::App app{"Offline throughput: N requests with random input and output lengths, served together"};
  kiln::cli::EngineFlags flags;
  flags.options.load_format = "dummy";
  flags.options.preset = "qwen2.5-0.5b";
  kiln::cli::AddEngineFlags(&app, &flags);
  kiln::ThroughputOptions o;
  std::string sweep = "1,4,16,64";
  bool nano_vllm = false;
  app.add_option("--num-requests", o.num_requests, "Requests")->capture_default_str();
  app.add_option("--min-input", o.min_input_len, "Shortest prompt")->capture_default_str();
  app.add_option("--max-input", o.max_input_len, "Longest prompt")->capture_default_str();
  app.add_option("--min-output", o.min_output_len, "Fewest new tokens")->capture_default_str();
  app.add_option("--max-output", o.max_output_len, "Most new tokens")->capture_default_str();
  app.add_option("--sweep", sweep, "max-num-seqs settings, comma-separated")->capture_default_str();
  app.add_option("--seed", o.seed, "Seeds the requests")->capture_default_str();
  app.add_flag("--nano-vllm", nano_vllm,
               "nano-vllm's workload: 256 requests, inputs and outputs of 100-1024 tokens");
  CLI11_PARSE(app, argc, argv);

  if (nano_vllm) {
    o.num_requests = 256;
    o.min_input_len = o.min_output_len = 100;
    o.max_input_len = o.max_output_len = 1024;
  }
  o.max_num_seqs.clear();
  std::stringstream list(sweep);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      o.max_num_seqs.push_back(std::stoi(item));
    } catch (const std::exception&) {
      fmt::print(stderr, "--sweep: '{}' is not a number\n", item);
      return 1;
    }
  }
  auto options = flags.Resolve();
  if (!options.ok()) {
    fmt::print(stderr, "kiln_bench_throughput: {}\n", options.status().ToString());
    return 1;
  }
  o.engine = *options;

  const std::string what =
      o.engine.load_format == "dummy" && !o.engine.preset.empty()
          ? fmt::format("{} shapes, generated {} weights", o.engine.preset, flags.dummy_dtype)
          : o.engine.model;
  fmt::print(stderr, "{}; {}\n", what, kiln::GetCpuInfo().Summary());
  auto rows = kiln::RunThroughputBenchmark(o, [](const kiln::ThroughputRow& r) {
    fmt::print(stderr, "max-num-seqs {:>3}: {:.1f} output tokens/s ({:.2f} s)\n", r.max_num_seqs,
               r.output_tokens_per_s, r.seconds);
  });
  if (!rows.ok()) {
    fmt::print(stderr, "kiln_bench_throughput: {}\n", rows.status().ToString());
    return 1;
  }
  int threads = rows->empty() ? 0 : rows->back().threads;
  fmt::print("{}", kiln::FormatThroughputTable(*rows, kiln::EstimatePeakFlops(threads),
                                               what + fmt::format(", precision {}", flags.precision)));
  return 0;
}
