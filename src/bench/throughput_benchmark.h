// The offline throughput benchmark (in the manner of nano-vllm's bench.py
// and vLLM's benchmark_throughput): N requests of random token ids with
// random input and output lengths, all submitted at once, run to completion
// at several --max-num-seqs settings; reports output tokens/s and the share
// of the machine's peak FLOP/s the model's arithmetic reached.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine_options.h"

namespace kiln {

struct ModelConfig;

struct ThroughputOptions {
  // The model and engine settings; max_num_seqs is taken from the sweep, and
  // max_model_len, when 0, from the longest request.
  EngineOptions engine;
  int32_t num_requests = 64;
  int32_t min_input_len = 64;
  int32_t max_input_len = 256;
  int32_t min_output_len = 32;
  int32_t max_output_len = 128;
  std::vector<int32_t> max_num_seqs = {1, 4, 16, 64};
  uint64_t seed = 0;             // the requests and their sampling
  int32_t max_token_id = 10000;  // prompt ids are drawn from [0, max_token_id)
  // Called when a setting's timed run starts (tokens_done 0) and then about
  // once a second as output tokens arrive, for progress.
  std::function<void(int32_t max_num_seqs, int64_t tokens_done, int64_t tokens_total)> on_progress;
};

struct ThroughputRow {
  int32_t max_num_seqs = 0;
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t preemptions = 0;
  // The engine's split of the run (its counters): tokens computed and step
  // time in prefill and in decode passes (a mixed pass is split by tokens).
  int64_t prefill_tokens_computed = 0;
  int64_t decode_tokens_computed = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double seconds = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;  // prompt and output tokens
  double model_flops = 0;         // the arithmetic the requests need (see RequestFlops)
  double flops_per_s = 0;
  int threads = 0;
};

// The nominal fp32 peak of the cores the engine computes on: cores x clock
// x FLOPs per cycle of the widest FMA the CPU has (2 FMA units assumed).
struct PeakFlops {
  double flops_per_s = 0;
  std::string description;  // how it was derived
};
PeakFlops EstimatePeakFlops(int threads);

// Floating-point operations a request of `prompt_len` + `output_len`
// tokens needs: 2 per weight of every linear layer for each token run
// (prompt_len + output_len - 1), the attention scores and sums over each
// token's context, and the LM head once per sampled token.
double RequestFlops(const ModelConfig& config, int64_t prompt_len, int64_t output_len);

// Loads the model once and runs the sweep, calling `on_row` after each
// setting (for progress).
Expected<std::vector<ThroughputRow>> RunThroughputBenchmark(
    const ThroughputOptions& options, const std::function<void(const ThroughputRow&)>& on_row = {});

// The results as a table, with the peak and what the model was.
std::string FormatThroughputTable(const std::vector<ThroughputRow>& rows, const PeakFlops& peak,
                                  const std::string& what);

}  // namespace kiln
