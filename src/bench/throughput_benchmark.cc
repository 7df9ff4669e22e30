// The offline throughput benchmark.
#include "bench/throughput_benchmark.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "compiler/compiled_model.h"
#include "core/cpu_info.h"
#include "engine/llm_engine.h"
#include "engine/model_loader.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

double CpuMhz() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1);
  }
  return 0;
}

struct BenchRequest {
  std::vector<int32_t> prompt;
  int32_t output_len = 0;
};

std::vector<BenchRequest> MakeRequests(const ThroughputOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::vector<BenchRequest> requests(static_cast<size_t>(o.num_requests));
  for (BenchRequest& r : requests) {
    r.prompt.resize(static_cast<size_t>(uniform(o.min_input_len, o.max_input_len)));
    for (int32_t& t : r.prompt) t = uniform(0, o.max_token_id - 1);
    r.output_len = uniform(o.min_output_len, o.max_output_len);
  }
  return requests;
}

GenerationRequest ToEngineRequest(const BenchRequest& r, uint64_t seed) {
  GenerationRequest g;
  g.prompt_ids = r.prompt;
  g.params.temperature = 0.6;  // nano-vllm's setting
  g.params.ignore_eos = true;
  g.params.max_tokens = r.output_len;
  g.params.seed = seed;
  return g;
}

}  // namespace

PeakFlops EstimatePeakFlops(int threads) {
  const CpuInfo& cpu = GetCpuInfo();
  int cores = std::max(1, std::min(threads > 0 ? threads : cpu.physical_cores, cpu.physical_cores));
  double ghz = CpuMhz() / 1000.0;
  int per_cycle = 8;  // SSE: a 4-wide multiply and a 4-wide add
  std::string unit = "SSE mul+add";
  if (cpu.avx512f) {
    per_cycle = 64;
    unit = "AVX-512 FMA x2";
  } else if (cpu.avx2 && cpu.fma) {
    per_cycle = 32;
    unit = "AVX2 FMA x2";
  }
  PeakFlops peak;
  peak.flops_per_s = cores * ghz * 1e9 * per_cycle;
  peak.description = fmt::format("{} cores x {:.2f} GHz x {} fp32 FLOP/cycle ({}) = {:.1f} GFLOP/s nominal",
                                 cores, ghz, per_cycle, unit, peak.flops_per_s / 1e9);
  if (ghz <= 0) peak.description = "clock unknown: no peak";
  return peak;
}

double RequestFlops(const ModelConfig& c, int64_t prompt_len, int64_t output_len) {
  const double q_width = static_cast<double>(c.num_heads * c.head_dim);
  const double kv_width = static_cast<double>(c.num_kv_heads * c.head_dim);
  const double hidden = static_cast<double>(c.hidden_size);
  const double attention_weights = hidden * q_width + 2 * hidden * kv_width + q_width * hidden;
  // A mixture's layer: the router, the experts a token chooses, the shared expert.
  const double dense_mlp = 3 * hidden * static_cast<double>(c.intermediate_size);
  const double moe_mlp =
      hidden * static_cast<double>(c.num_experts) +
      3 * hidden *
          static_cast<double>(c.experts_per_token * c.expert_intermediate_size + c.shared_expert_intermediate_size);
  const int64_t tokens_run = prompt_len + output_len - 1;
  // Token at position p attends to p + 1 keys: QK^T and the weighted sum of
  // V, 2 FLOPs per multiply-add each.
  const double context_sum = static_cast<double>(tokens_run) * static_cast<double>(tokens_run + 1) / 2;
  double flops = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const double linear_weights = attention_weights + (c.LayerIsMoe(l) ? moe_mlp : dense_mlp);
    flops += 2 * linear_weights * static_cast<double>(tokens_run) + 4 * q_width * context_sum;
  }
  flops += 2 * hidden * static_cast<double>(c.vocab_size) * static_cast<double>(output_len);
  return flops;
}

Expected<std::vector<ThroughputRow>> RunThroughputBenchmark(
    const ThroughputOptions& o, const std::function<void(const ThroughputRow&)>& on_row) {
  if (o.num_requests < 1 || o.min_input_len < 1 || o.max_input_len < o.min_input_len ||
      o.min_output_len < 1 || o.max_output_len < o.min_output_len || o.max_token_id < 1) {
    return InvalidArgument("throughput benchmark: request counts and lengths must be positive ranges");
  }
  KILN_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(o.engine));
  const ModelConfig& config = model.weights->config();
  if (o.max_token_id > config.vocab_size) {
    return InvalidArgument("throughput benchmark: token ids up to {} beyond the vocabulary of {}",
                           o.max_token_id, config.vocab_size);
  }
  std::vector<BenchRequest> requests = MakeRequests(o);
  double flops = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  for (const BenchRequest& r : requests) {
    flops += RequestFlops(config, static_cast<int64_t>(r.prompt.size()), r.output_len);
    prompt_tokens += static_cast<int64_t>(r.prompt.size());
    output_tokens += r.output_len;
  }

  std::vector<ThroughputRow> rows;
  for (int32_t max_seqs : o.max_num_seqs) {
    EngineOptions eo = o.engine;
    eo.max_num_seqs = max_seqs;
    eo.max_num_batched_tokens = std::max(eo.max_num_batched_tokens, max_seqs);
    if (eo.max_model_len == 0) eo.max_model_len = o.max_input_len + o.max_output_len;
    KILN_ASSIGN_OR_RETURN(auto engine, LLMEngine::Create(model, eo));

    // One short request first, so that first-touch page faults of the
    // arena and the KV cache are not timed.
    std::vector<GenerationRequest> warmup = {ToEngineRequest({{1, 2, 3, 4}, 2}, 0)};
    KILN_RETURN_IF_ERROR(engine->Generate(std::move(warmup)).status());
    const EngineCounters before = engine->Counters();

    std::vector<GenerationRequest> batch;
    int64_t tokens_done = 0;
    double last_report = EngineClock();
    for (size_t i = 0; i < requests.size(); ++i) {
      batch.push_back(ToEngineRequest(requests[i], o.seed + i));
      if (o.on_progress) {
        batch.back().on_token = [&](const TokenEvent& e) {
          if (e.token >= 0) ++tokens_done;
          if (EngineClock() - last_report >= 1.0) {
            last_report = EngineClock();
            o.on_progress(max_seqs, tokens_done, output_tokens);
          }
        };
      }
    }
    if (o.on_progress) o.on_progress(max_seqs, 0, output_tokens);
    const double start = EngineClock();
    KILN_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, engine->Generate(std::move(batch)));
    const double seconds = EngineClock() - start;

    ThroughputRow row;
    row.max_num_seqs = max_seqs;
    row.requests = static_cast<int64_t>(results.size());
    row.prompt_tokens = prompt_tokens;
    for (const GenerationResult& r : results) row.output_tokens += static_cast<int64_t>(r.output_ids.size());
    if (row.output_tokens != output_tokens) {
      return Internal("throughput benchmark: {} tokens generated, {} requested", row.output_tokens,
                      output_tokens);
    }
    const EngineCounters after = engine->Counters();
    row.preemptions = after.num_preemptions - before.num_preemptions;
    row.prefill_tokens_computed = after.prompt_tokens_computed - before.prompt_tokens_computed;
    row.decode_tokens_computed = after.decode_tokens_computed - before.decode_tokens_computed;
    row.prefill_seconds = after.prefill_seconds - before.prefill_seconds;
    row.decode_seconds = after.decode_seconds - before.decode_seconds;
    row.seconds = seconds;
    row.output_tokens_per_s = static_cast<double>(row.output_tokens) / seconds;
    row.total_tokens_per_s = static_cast<double>(row.output_tokens + row.prompt_tokens) / seconds;
    row.model_flops = flops;
    row.flops_per_s = flops / seconds;
    row.threads = engine->compiled_model().report().threads;
    rows.push_back(row);
    if (on_row) on_row(row);
  }
  return rows;
}

std::string FormatThroughputTable(const std::vector<ThroughputRow>& rows, const PeakFlops& peak,
                                  const std::string& what) {
  std::string out = fmt::format("{}\n", what);
  if (!rows.empty()) {
    out += fmt::format("{} requests, {} prompt tokens, {} output tokens, {} threads\n", rows[0].requests,
                       rows[0].prompt_tokens, rows[0].output_tokens, rows[0].threads);
  }
  out += fmt::format("peak: {}\n\n", peak.description);
  out += fmt::format("{:>12} {:>10} {:>12} {:>12} {:>12} {:>10} {:>12}\n", "max-num-seqs", "seconds",
                     "output tok/s", "total tok/s", "GFLOP/s", "of peak", "preemptions");
  for (const ThroughputRow& r : rows) {
    double share = peak.flops_per_s > 0 ? r.flops_per_s / peak.flops_per_s : 0;
    out += fmt::format("{:>12} {:>10.2f} {:>12.1f} {:>12.1f} {:>12.1f} {:>9.1f}% {:>12}\n", r.max_num_seqs,
                       r.seconds, r.output_tokens_per_s, r.total_tokens_per_s, r.flops_per_s / 1e9,
                       100 * share, r.preemptions);
  }
  if (!rows.empty() && peak.flops_per_s > 0) {
    const ThroughputRow& last = rows.back();
    out += fmt::format(
        "\nAt max-num-seqs {}: {:.1f} GFLOP/s of model arithmetic, {:.1f}% of the nominal peak.\n",
        last.max_num_seqs, last.flops_per_s / 1e9, 100 * last.flops_per_s / peak.flops_per_s);
  }
  return out;
}

}  // namespace kiln
