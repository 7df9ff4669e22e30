// What speculative decoding's passes cost on a real model: one decode pass
// (1 token), one verification pass (k + 1 = 5 tokens, logits for each) and
// one q4_0 self-draft pass (1 token), each at context 512, on 2 threads
// (KILN_BENCH_THREADS to change).
// On the tiny trained models these are dominated by fixed per-pass costs,
// which is what this measures. KILN_MODELS_DIR names the folder holding
// tiny-llama, tiny-qwen2 and tiny-qwen3 (default ../shared/models).
// BM_PresetPass times the same passes on the Qwen2.5-0.5B shape with
// generated weights at BF16, Q8_0 and Q4_0: there a pass's time is the
// weights' read, which tiny models hardly have, and whether a verification
// pass costs about one decode pass shows. Unlike the time to first token of a 5-token
// prompt, this pass has no request to start and computes every row's
// logits, as verification does. BM_FilePass times them on the model that
// KILN_SPEC_BENCH_MODEL names (a GGUF file people download: a Q4_K_M
// file's Q5_0, Q8_0, Q4_K and Q6_K tensors each take their own few-row
// kernels); skipped when it is unset.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "engine/model_loader.h"
#include "engine/model_session.h"
#include "engine/model_session_options.h"
#include "format/model_config.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

constexpr int32_t kContext = 512;
const char* const kModels[] = {"tiny-llama", "tiny-qwen2", "tiny-qwen3"};

struct Session {
  std::shared_ptr<const WeightStore> weights;
  std::unique_ptr<ModelSession> session;
  std::vector<float> logits;
};

// Prefills kContext - tokens arbitrary ids into a fresh session of
// `weights`, then times passes over the last `tokens` ids, with logits
// for every one of them.
void TimePasses(benchmark::State& state, std::shared_ptr<const WeightStore> weights, int32_t tokens) {
  Session s;
  s.weights = std::move(weights);
  ModelSessionOptions so;
  const char* threads = std::getenv("KILN_BENCH_THREADS");
  so.threads = threads != nullptr ? std::atoi(threads) : 2;
  so.max_seqs = 1;
  so.kv_tokens_per_seq = kContext + 16;
  auto session = ModelSession::Create(*s.weights, so);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  s.session = std::move(session).value();
  const int64_t vocab = s.weights->config().vocab_size;
  // The context: arbitrary ids, prefilled once.
  std::vector<int32_t> ids(kContext);
  for (int32_t i = 0; i < kContext; ++i) ids[static_cast<size_t>(i)] = (i * 37 + 11) % static_cast<int32_t>(vocab);
  s.logits.resize(static_cast<size_t>(vocab) * static_cast<size_t>(tokens));
  const int32_t last = kContext - tokens - 1;
  if (!s.session->ForwardSequence(std::span(ids).first(static_cast<size_t>(kContext - tokens)), 0,
                                  std::span<const int32_t>(&last, 1), s.logits.data())
           .ok()) {
    state.SkipWithError("prefill failed");
    return;
  }
  // Every token of a verification pass needs its logits.
  std::vector<int32_t> rows(static_cast<size_t>(tokens));
  std::iota(rows.begin(), rows.end(), 0);
  const auto step = std::span(ids).subspan(static_cast<size_t>(kContext - tokens));
  for (auto _ : state) {
    Status st = s.session->ForwardSequence(step, kContext - tokens, rows, s.logits.data());
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(s.logits.data());
  }
}

// The weights of the model at `path`, or null with the benchmark skipped.
std::shared_ptr<const WeightStore> LoadOrSkip(benchmark::State& state, const std::string& path) {
  EngineOptions options;
  options.model = path;
  auto loaded = LoadModel(options);
  if (!loaded.ok()) {
    state.SkipWithError(loaded.status().ToString().c_str());
    return nullptr;
  }
  return loaded->weights;
}

// Args: model (index into kModels), query tokens, q4_0 (1: the weights
// requantized, as `--draft-model self --draft-dtype q4_0` drafts).
void BM_Pass(benchmark::State& state) {
  const char* env = std::getenv("KILN_MODELS_DIR");
  const std::string dir =
      std::string(env != nullptr ? env : "../shared/models") + "/" + kModels[state.range(0)];
  std::shared_ptr<const WeightStore> weights = LoadOrSkip(state, dir);
  if (weights == nullptr) return;
  if (state.range(2) != 0) {
    auto q4 = WeightStore::Requantized(*weights, DType::kQ4_0);
    if (!q4.ok()) {
      state.SkipWithError(q4.status().ToString().c_str());
      return;
    }
    weights = std::shared_ptr<const WeightStore>(std::move(q4).value());
  }
  TimePasses(state, std::move(weights), static_cast<int32_t>(state.range(1)));
  state.SetLabel(std::string(kModels[state.range(0)]) + (state.range(2) != 0 ? " q4_0" : ""));
}

const DType kPresetDtypes[] = {DType::kBF16, DType::kQ8_0, DType::kQ4_0};

// Args: dtype (index into kPresetDtypes), query tokens.
void BM_PresetPass(benchmark::State& state) {
  EngineOptions options;
  options.load_format = "dummy";
  options.preset = "qwen2.5-0.5b";
  options.dummy_dtype = kPresetDtypes[state.range(0)];
  auto loaded = LoadModel(options);
  if (!loaded.ok()) {
    state.SkipWithError(loaded.status().ToString().c_str());
    return;
  }
  TimePasses(state, loaded->weights, static_cast<int32_t>(state.range(1)));
  state.SetLabel(std::string("qwen2.5-0.5b ") + DTypeName(options.dummy_dtype));
}

// Args: query tokens.
void BM_FilePass(benchmark::State& state) {
  const char* path = std::getenv("KILN_SPEC_BENCH_MODEL");
  if (path == nullptr) {
    state.SkipWithError("KILN_SPEC_BENCH_MODEL is not set");
    return;
  }
  std::shared_ptr<const WeightStore> weights = LoadOrSkip(state, path);
  if (weights == nullptr) return;
  TimePasses(state, std::move(weights), static_cast<int32_t>(state.range(0)));
  state.SetLabel(path);
}

BENCHMARK(BM_Pass)
    ->ArgsProduct({{0, 1, 2}, {1, 5}, {0, 1}})
    ->ArgNames({"model", "tokens", "q4_0"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_PresetPass)
    ->ArgsProduct({{0, 1, 2}, {1, 5}})
    ->ArgNames({"dtype", "tokens"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_FilePass)->Arg(1)->Arg(5)->ArgName("tokens")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
