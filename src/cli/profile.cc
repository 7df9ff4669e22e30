// `kiln profile`: a batch of random prompts generated through the engine
// with the profiler on (after an unrecorded warmup run), then the per-op
// table of its prefill and decode steps, and the trace on request.
#include <algorithm>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "bench/model_figures.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/profile_flags.h"
#include "compiler/compiled_model.h"
#include "compiler/profiler.h"
#include "engine/llm_engine.h"
#include "format/model_config.h"

namespace kiln::cli {
namespace {

struct ProfileArgs {
  EngineFlags engine;
  ProfileFlags profiling;
  int32_t input_len = 128;
  int32_t output_len = 32;
  int32_t batch_size = 1;
  int32_t warmup = 1;
  uint64_t seed = 0;
};

// One run: `batch` requests of input_len random tokens, each generating
// output_len tokens greedily, stepped until all finish.
Status RunBatch(LLMEngine& engine, const ProfileArgs& a, std::mt19937_64& rng) {
  const auto vocab = static_cast<uint64_t>(std::max<int64_t>(engine.model_config().vocab_size, 1));
  for (int32_t b = 0; b < a.batch_size; ++b) {
    GenerationRequest r;
    r.prompt_ids.resize(static_cast<size_t>(a.input_len));
    for (int32_t& id : r.prompt_ids) id = static_cast<int32_t>(rng() % vocab);
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = a.output_len;
    KILN_RETURN_IF_ERROR(engine.AddRequest(std::move(r)).status());
  }
  while (engine.HasUnfinishedRequests()) KILN_RETURN_IF_ERROR(engine.Step());
  return Status::Ok();
}

Status RunProfile(const ProfileArgs& a) {
  if (a.input_len < 1 || a.output_len < 1 || a.batch_size < 1 || a.warmup < 0) {
    return InvalidArgument("--input-len, --output-len and --batch-size must be positive, --warmup not negative");
  }
  KILN_ASSIGN_OR_RETURN(EngineOptions options, a.engine.Resolve());
  if (options.model.empty() && options.preset.empty()) return InvalidArgument("no model: give -m MODEL or --preset");
  if (options.model.empty()) options.load_format = "dummy";
  options.max_num_seqs = std::max(options.max_num_seqs, a.batch_size);
  options.enable_prefix_caching = false;  // every run computes its whole prompt
  if (options.max_model_len == 0) options.max_model_len = a.input_len + a.output_len;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LLMEngine> engine, LLMEngine::Create(options));
  std::mt19937_64 rng(a.seed);
  for (int32_t w = 0; w < a.warmup; ++w) KILN_RETURN_IF_ERROR(RunBatch(*engine, a, rng));
  const CompiledModel& model = engine->compiled_model();
  fmt::print("{}: batch {}, {} prompt tokens, {} generated each; {} threads\n",
             options.model.empty() ? options.preset : options.model, a.batch_size, a.input_len, a.output_len,
             model.report().threads);
  EnableProfiling(true);
  Status run = RunBatch(*engine, a, rng);
  if (!run.ok()) {
    EnableProfiling(false);
    return run;
  }
  return FinishProfiling(a.profiling, model.report().threads,
                         bench::DescribeModel(model, options.kv_cache_dtype).arithmetic, stdout, true);
}

}  // namespace

void RegisterProfile(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile", "Time every kernel of a generated batch: per-op table for prefill and decode, and a trace");
  auto args = std::make_shared<ProfileArgs>();
  ProfileArgs& a = *args;
  AddEngineFlags(cmd, &a.engine);
  AddProfileFlags(cmd, &a.profiling, /*with_profile=*/false);
  cmd->add_option("--input-len", a.input_len, "Prompt tokens per request (random ids)")->capture_default_str();
  cmd->add_option("--output-len", a.output_len, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--batch-size", a.batch_size, "Requests run together")->capture_default_str();
  cmd->add_option("--warmup", a.warmup, "Unrecorded runs first")->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seeds the random prompts")->capture_default_str();
  cmd->callback([args]() {
    Status s = RunProfile(*args);
    if (!s.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "kiln profile: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
