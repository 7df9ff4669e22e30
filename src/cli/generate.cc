// `kiln generate`: runs one prompt (streaming its tokens to stdout) or many
// (from a file) through the engine together, then reports prefill and
// decode speed on stderr.
#include <cstdio>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/model_figures.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/profile_flags.h"
#include "cli/prompt_file.h"
#include "cli/structured_output_flags.h"
#include "compiler/compiled_model.h"
#include "engine/llm_engine.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace kiln::cli {
namespace {

// max_tokens when neither -n nor the request sets it: filled in per request
// from the generation config, within the context that is left.
constexpr int32_t kMaxTokensUnset = std::numeric_limits<int32_t>::max();
constexpr int32_t kDefaultMaxTokens = 256;

struct GenerateArgs {
  EngineFlags engine;
  ProfileFlags profiling;
  std::vector<std::string> prompts;
  std::string prompts_file;
  bool chat = false;
  std::string system;
  bool echo = false;
  std::string output = "text";
  std::string dump_dir;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  StructuredOutputFlags structured;
};

// The sampling defaults: the model's generation config, then the flags given.
SamplingParams DefaultParams(const CLI::App& cmd, const GenerateArgs& a, const GenerationConfig& generation) {
  SamplingParams p = generation.DefaultSamplingParams();
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  p.max_tokens = given("-n") ? a.params.max_tokens : kMaxTokensUnset;
  if (given("--temperature")) p.temperature = a.params.temperature;
  if (given("--top-k")) p.top_k = a.params.top_k;
  if (given("--top-p")) p.top_p = a.params.top_p;
  if (given("--min-p")) p.min_p = a.params.min_p;
  if (given("--repetition-penalty")) p.repetition_penalty = a.params.repetition_penalty;
  if (given("--presence-penalty")) p.presence_penalty = a.params.presence_penalty;
  if (given("--frequency-penalty")) p.frequency_penalty = a.params.frequency_penalty;
  if (given("--min-tokens")) p.min_tokens = a.params.min_tokens;
  if (given("--seed")) p.seed = a.seed;
  p.ignore_eos = a.params.ignore_eos;
  p.stop = a.stop;
  return p;
}

// The engine request for one prompt: chat rendering, tokenization, and the
// default max_tokens fitted into the context.
Expected<GenerationRequest> MakeRequest(const PromptSpec& spec, const GenerateArgs& a,
                                        const LLMEngine& engine, int32_t default_max_tokens) {
  GenerationRequest r;
  r.params = spec.params;
  r.prompt_ids = spec.prompt_ids;
  if (!spec.messages.is_null() || (a.chat && r.prompt_ids.empty())) {
    if (engine.tokenizer() == nullptr) return InvalidArgument("--chat needs a tokenizer");
    nlohmann::ordered_json messages =
        spec.messages.is_null() ? SingleTurnChat(spec.prompt, a.system) : spec.messages;
    KILN_ASSIGN_OR_RETURN(r.prompt, RenderChatPrompt(*engine.tokenizer(), messages));
    r.add_special_tokens = false;  // the template places them
  } else {
    r.prompt = spec.prompt;
  }
  KILN_ASSIGN_OR_RETURN(r.prompt_ids, engine.PromptIds(r));
  if (r.params.max_tokens == kMaxTokensUnset) {
    int64_t room = engine.max_model_len() - static_cast<int64_t>(r.prompt_ids.size());
    r.params.max_tokens =
        static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(default_max_tokens, room)));
  }
  return r;
}

nlohmann::ordered_json ResultJson(size_t index, const PromptSpec& spec, const GenerationResult& r) {
  nlohmann::ordered_json j;
  j["index"] = index;
  if (!spec.prompt.empty()) j["prompt"] = spec.prompt;
  j["text"] = r.text;
  j["output_ids"] = r.output_ids;
  j["finish_reason"] = FinishReasonName(r.stats.finish_reason);
  j["prompt_tokens"] = r.stats.prompt_tokens;
  j["cached_tokens"] = r.stats.cached_tokens;
  j["completion_tokens"] = r.stats.completion_tokens;
  j["queue_time"] = r.stats.queue_time();
  j["ttft"] = r.stats.ttft();
  j["tpot"] = r.stats.tpot();
  if (!r.logprobs.empty()) j["logprobs"] = r.logprobs;
  return j;
}

void PrintSpeed(const EngineCounters& c, size_t requests, double seconds) {
  auto rate = [](int64_t tokens, double s) { return s > 0 ? static_cast<double>(tokens) / s : 0.0; };
  fmt::print(stderr,
             "prefill: {} tokens in {:.3f} s ({:.1f} tokens/s), {} prompt tokens from the prefix cache\n",
             c.prompt_tokens_computed, c.prefill_seconds, rate(c.prompt_tokens_computed, c.prefill_seconds),
             c.prefix_cache_hits);
  // Drafts are proposed for decoding only, so their time is decode time:
  // without it a draft model's speed-up would be counted as free.
  const double decode_seconds = c.decode_seconds + c.spec_draft_seconds;
  fmt::print(stderr, "decode: {} tokens in {:.4f} s ({:.1f} tokens/s{})\n", c.decode_tokens_computed,
             decode_seconds, rate(c.decode_tokens_computed, decode_seconds),
             c.spec_draft_seconds > 0 || c.spec_verifications > 0 ? ", drafting included" : "");
  if (c.spec_verifications > 0) {
    fmt::print(stderr,
               "speculation: {} of {} draft tokens accepted ({:.1f}%), {:.2f} accepted per verification pass "
               "({} passes); {:.2f} ms drafting, {:.2f} ms in target passes\n",
               c.spec_accepted_tokens, c.spec_draft_tokens,
               100.0 * static_cast<double>(c.spec_accepted_tokens) / static_cast<double>(c.spec_draft_tokens),
               static_cast<double>(c.spec_accepted_tokens) / static_cast<double>(c.spec_verifications),
               c.spec_verifications, 1e3 * c.spec_draft_seconds,
               1e3 * (c.prefill_seconds + c.decode_seconds));
  }
  if (c.spec_stopped_requests > 0) {
    fmt::print(stderr,
               "speculation stopped for {} of {} requests: the draft model's tokens did not pay for "
               "themselves\n",
               c.spec_stopped_requests, requests);
  }
  if (c.spec_row_cost > 0 || c.spec_draft_cost > 0) {
    fmt::print(
        stderr,
        "speculation costs, as shares of a plain decode pass: {:.2f} per verified draft row, {:.2f} per "
        "draft token drafted; {:.2f} ms of the drafting caught the draft model up (not charged)\n",
        c.spec_row_cost, c.spec_draft_cost, 1e3 * c.spec_catch_up_seconds);
  }
  if (requests > 1) {
    fmt::print(stderr,
               "{} requests, {} tokens generated in {:.3f} s ({:.1f} output tokens/s), {} preemptions\n",
               requests, c.generation_tokens, seconds, rate(c.generation_tokens, seconds), c.num_preemptions);
  }
}

Status RunGenerate(const CLI::App& cmd, const GenerateArgs& a) {
  KILN_ASSIGN_OR_RETURN(EngineOptions options, a.engine.Resolve());
  options.dump_dir = a.dump_dir;
  if (a.prompts.empty() && a.prompts_file.empty()) {
    return InvalidArgument("no prompt: give -p PROMPT or -f FILE");
  }
  // The schema or grammar is checked before the model loads.
  SamplingParams constraint;
  KILN_RETURN_IF_ERROR(ApplyStructuredOutputFlags(a.structured, &constraint));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LLMEngine> engine, LLMEngine::Create(options));

  SamplingParams defaults = DefaultParams(cmd, a, engine->generation_config());
  defaults.json_schema = constraint.json_schema;
  defaults.grammar = constraint.grammar;
  defaults.json_object = constraint.json_object;
  int32_t default_max_tokens = kDefaultMaxTokens;
  if (auto n = engine->generation_config().max_new_tokens; n && *n > 0) default_max_tokens = *n;
  std::vector<PromptSpec> specs;
  for (const std::string& p : a.prompts) {
    PromptSpec spec;
    spec.prompt = p;
    spec.params = defaults;
    specs.push_back(std::move(spec));
  }
  if (!a.prompts_file.empty()) {
    KILN_ASSIGN_OR_RETURN(std::vector<PromptSpec> from_file, ReadPromptFile(a.prompts_file, defaults));
    for (PromptSpec& s : from_file) specs.push_back(std::move(s));
  }

  const bool stream = specs.size() == 1 && a.output == "text";
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto request = MakeRequest(specs[i], a, *engine, default_max_tokens);
    if (!request.ok()) {
      std::string where = specs[i].line > 0 ? fmt::format("{}: line {}", a.prompts_file, specs[i].line)
                                            : fmt::format("prompt {}", i);
      return request.status().WithContext(where);
    }
    requests.push_back(std::move(request).value());
  }

  if (stream) {
    if (a.echo) {
      std::string prompt_text = requests[0].prompt;
      if (prompt_text.empty() && engine->tokenizer()) {
        prompt_text = engine->tokenizer()->Decode(requests[0].prompt_ids);
      }
      fmt::print("{}", prompt_text);
    }
    requests[0].on_token = [](const TokenEvent& event) {
      if (event.text.empty()) return;
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      std::fflush(stdout);
    };
  }

  StartProfiling(a.profiling);
  const double start = EngineClock();
  KILN_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, engine->Generate(std::move(requests)));
  const double seconds = EngineClock() - start;

  bool any_error = false;
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& r = results[i];
    any_error = any_error || r.stats.finish_reason == FinishReason::kError;
    if (stream) {
      fmt::print("\n");
    } else if (a.output == "jsonl") {
      fmt::print("{}\n", ResultJson(i, specs[i], r).dump());
    } else {
      fmt::print("--- {} ({} prompt tokens, {} cached, {} generated, {}) ---\n", i, r.stats.prompt_tokens,
                 r.stats.cached_tokens, r.stats.completion_tokens, FinishReasonName(r.stats.finish_reason));
      if (a.echo) fmt::print("{}", specs[i].prompt);
      fmt::print("{}\n", r.text);
    }
  }
  std::fflush(stdout);
  PrintSpeed(engine->Counters(), results.size(), seconds);
  if (!a.dump_dir.empty()) fmt::print(stderr, "dumped the values of every pass to {}\n", a.dump_dir);
  KILN_RETURN_IF_ERROR(FinishProfiling(a.profiling, engine->compiled_model().report().threads,
                                       bench::DescribeModel(engine->compiled_model(), options.kv_cache_dtype).arithmetic));
  if (any_error) return Internal("a request failed while running");
  return Status::Ok();
}

}  // namespace

void RegisterGenerate(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("generate", "Generate text from one prompt (streamed) or many (batched together)");
  auto args = std::make_shared<GenerateArgs>();
  GenerateArgs& a = *args;
  AddEngineFlags(cmd, &a.engine);
  cmd->add_option("-p,--prompt", a.prompts, "A prompt (repeat for several)");
  cmd->add_option(
      "-f,--prompts-file", a.prompts_file,
      "Prompts, one per line; or JSON Lines (a .jsonl name or a first line starting with '{'), each "
      "an object with \"prompt\", \"prompt_ids\" or \"messages\" and optionally max_tokens, "
      "min_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty, "
      "frequency_penalty, seed, stop, stop_token_ids, ignore_eos, logprobs, top_logprobs");
  cmd->add_flag("--chat", a.chat, "Apply the model's chat template to each prompt");
  cmd->add_option("--system", a.system, "With --chat: a system message");
  cmd->add_flag("--echo", a.echo, "Print the prompt before its completion");
  cmd->add_option("--output", a.output, "text or jsonl (one result object per line)")
      ->check(CLI::IsMember({"text", "jsonl"}))
      ->capture_default_str();
  cmd->add_option(
      "--dump", a.dump_dir,
      "Write every named intermediate value of every forward pass to DIR (.npy files and index.json)");
  const std::string sampling = "Sampling (defaults: the model's generation_config.json)";
  cmd->add_option("-n,--max-tokens", a.params.max_tokens, "New tokens at most")->group(sampling);
  cmd->add_option("--min-tokens", a.params.min_tokens, "New tokens before stop conditions apply")
      ->group(sampling);
  cmd->add_option("--temperature", a.params.temperature, "0 for greedy")->group(sampling);
  cmd->add_option("--top-k", a.params.top_k, "0: off")->group(sampling);
  cmd->add_option("--top-p", a.params.top_p, "1: off")->group(sampling);
  cmd->add_option("--min-p", a.params.min_p, "0: off")->group(sampling);
  cmd->add_option("--repetition-penalty", a.params.repetition_penalty, "1: off")->group(sampling);
  cmd->add_option("--presence-penalty", a.params.presence_penalty, "0: off")->group(sampling);
  cmd->add_option("--frequency-penalty", a.params.frequency_penalty, "0: off")->group(sampling);
  cmd->add_option("--seed", a.seed, "Makes sampling reproducible")->group(sampling);
  cmd->add_option("--stop", a.stop, "A stop string (repeat for several)")->group(sampling);
  cmd->add_flag("--ignore-eos", a.params.ignore_eos, "Keep generating past end-of-sequence tokens")
      ->group(sampling);
  AddStructuredOutputFlags(cmd, &a.structured);
  AddProfileFlags(cmd, &a.profiling);
  cmd->callback([cmd, args]() {
    Status s = RunGenerate(*cmd, *args);
    if (!s.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "kiln generate: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
