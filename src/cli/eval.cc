// `kiln eval`: perplexity of a model on a text file, by llama.cpp's method by
// default (so the figures compare with llama-perplexity's), with a progress
// bar on stderr and the result on stdout (text or JSON).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "accuracy/perplexity.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "compiler/compiled_model.h"
#include "core/mapped_file.h"
#include "engine/model_loader.h"
#include "format/weight_store.h"
#include "engine/calibration.h"
#include "tokenizer/tokenizer.h"

namespace kiln::cli {
namespace {

struct EvalArgs {
  EngineFlags engine;
  std::string perplexity_file;
  int64_t ctx = 512;
  std::string score = "second-half";
  int64_t max_chunks = 0;
  bool json = false;
  bool no_bos = false;
};

// The progress line: a bar on a terminal (rewritten in place), else a plain
// line about every tenth of the way.
class ProgressPrinter {
 public:
  ProgressPrinter() : terminal_(isatty(STDERR_FILENO) == 1) {}

  void Update(int64_t done, int64_t total, const PerplexityResult& r) {
    const double rate = r.seconds > 0 ? static_cast<double>(r.tokens_evaluated) / r.seconds : 0.0;
    if (terminal_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
      fmt::print(stderr, "\r[{}{}] {}/{} chunks  ppl {:.4f}  {:.0f} tokens/s ", std::string(filled, '#'),
                 std::string(kWidth - filled, '.'), done, total, r.ppl, rate);
      if (done == total) fmt::print(stderr, "\n");
      return;
    }
    const int64_t step = std::max<int64_t>(1, total / 10);
    if (done % step == 0 || done == total) {
      fmt::print(stderr, "eval: {}/{} chunks, ppl {:.4f}, {:.0f} tokens/s\n", done, total, r.ppl, rate);
    }
  }

 private:
  bool terminal_;
};

// The text as llama.cpp's perplexity tool reads it: one trailing newline removed.
Expected<std::string> ReadEvalText(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// "off", "dynamic" (activations quantized per token) or "static" (calibrated clips).
const char* W8A8Mode(const cpu::W8A8Options& w8a8) {
  if (!w8a8.enabled) return "off";
  return w8a8.input_clips.empty() ? "dynamic" : "static";
}

// The header line's note on W8A8, empty when it is off.
std::string W8A8Note(const cpu::W8A8Options& w8a8) {
  if (!w8a8.enabled) return "";
  if (w8a8.input_clips.empty()) return ", W8A8 (activations per token)";
  return fmt::format(", W8A8 (static activation clips of {} weights)", w8a8.input_clips.size());
}

Status RunEval(const EvalArgs& a) {
  if (a.perplexity_file.empty()) return InvalidArgument("nothing to evaluate: give --perplexity FILE");
  KILN_ASSIGN_OR_RETURN(EngineOptions options, a.engine.Resolve());
  KILN_ASSIGN_OR_RETURN(ScoreMode score, ParseScoreMode(a.score));
  KILN_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(options));
  if (loaded.tokenizer == nullptr) return InvalidArgument("the model has no tokenizer to read the text with");

  CompileOptions co;
  co.backend = options.backend;
  co.precision = options.precision;
  co.max_batch_tokens = std::min<int64_t>(options.max_num_batched_tokens, a.ctx);
  co.max_model_len = options.max_model_len;
  co.max_seqs = 1;
  co.block_size = options.block_size;
  co.kv_dtype = options.kv_cache_dtype;
  co.threads = options.threads;
  if (options.w8a8) {
    // As the engine does: static clips from --calibration or --w8a8-clips,
    // else every input quantized per token at run time.
    co.w8a8.enabled = true;
    CalibrationOptions calibration;
    calibration.percentile = options.calibration_percentile;
    calibration.threads = options.threads;
    KILN_ASSIGN_OR_RETURN(co.w8a8.input_clips,
                          ResolveActivationClips(*loaded.weights, loaded.tokenizer.get(), options.calibration,
                                                 options.w8a8_clips, calibration));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, CompiledModel::Compile(*loaded.weights, co));

  KILN_ASSIGN_OR_RETURN(std::string text, ReadEvalText(a.perplexity_file));
  const Tokenizer& tokenizer = *loaded.tokenizer;
  std::vector<int32_t> tokens = tokenizer.Encode(text, /*add_special=*/true);

  PerplexityOptions po;
  po.ctx = a.ctx;
  po.score = score;
  po.bos_id = tokenizer.add_bos() && !a.no_bos ? tokenizer.bos_id() : -1;
  po.batch_tokens = co.max_batch_tokens;
  po.max_chunks = a.max_chunks;
  if (!a.json) {
    fmt::print(stderr, "eval: {} tokens, chunks of {}, scoring {}{}, {} threads, kernels {}{}\n", tokens.size(), a.ctx,
               ScoreModeName(score), po.bos_id >= 0 ? ", first token of each chunk BOS" : "",
               model->report().threads, model->report().isa, W8A8Note(co.w8a8));
  }
  ProgressPrinter printer;
  auto progress = [&](int64_t done, int64_t total, const PerplexityResult& r) { printer.Update(done, total, r); };
  KILN_ASSIGN_OR_RETURN(PerplexityResult r, EvaluatePerplexity(*model, tokens, po, progress));
  const double rate = r.seconds > 0 ? static_cast<double>(r.tokens_evaluated) / r.seconds : 0.0;
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = options.model;
    j["file"] = a.perplexity_file;
    j["ppl"] = r.ppl;
    j["ppl_stderr"] = r.ppl_error;
    j["mean_nll"] = r.mean_nll;
    j["n_ctx"] = r.ctx;
    j["n_chunks"] = r.num_chunks;
    j["n_tokens"] = tokens.size();
    j["n_scored"] = r.num_scored;
    j["tokens_evaluated"] = r.tokens_evaluated;
    j["seconds"] = r.seconds;
    j["tokens_per_second"] = rate;
    j["score"] = ScoreModeName(score);
    j["bos_replaced"] = po.bos_id >= 0;
    j["precision"] = PrecisionName(options.precision);
    j["kv_cache_dtype"] = DTypeName(options.kv_cache_dtype);
    j["w8a8"] = W8A8Mode(co.w8a8);
    j["threads"] = model->report().threads;
    j["isa"] = model->report().isa;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("perplexity: {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_error);
    fmt::print("tokens evaluated: {} in {} chunks of {} ({} scored)\n", r.tokens_evaluated, r.num_chunks, r.ctx,
               r.num_scored);
    fmt::print("speed: {:.1f} tokens/s ({:.2f} s)\n", rate, r.seconds);
  }
  return Status::Ok();
}

}  // namespace

void RegisterEval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Measure a model's perplexity on a text file");
  auto args = std::make_shared<EvalArgs>();
  EvalArgs& a = *args;
  AddEngineFlags(cmd, &a.engine);
  cmd->add_option("--perplexity", a.perplexity_file,
                  "The text to score (read whole, one trailing newline removed, tokenized with the model's "
                  "tokenizer, BOS first where it adds one)");
  cmd->add_option("--ctx", a.ctx, "Tokens per chunk; chunks are evaluated alone, from an empty cache")
      ->capture_default_str();
  cmd->add_option("--score", a.score,
                  "second-half: as llama.cpp's perplexity tool, the logits at ctx/2 .. ctx-2 of each chunk "
                  "predict the next token; all: every position but the last")
      ->check(CLI::IsMember({"second-half", "all"}))
      ->capture_default_str();
  cmd->add_flag("--no-bos", a.no_bos, "Keep each chunk's first token (by default it becomes BOS where the model "
                                      "adds BOS)");
  cmd->add_option("--max-chunks", a.max_chunks, "Evaluate at most this many chunks (0: all)");
  cmd->add_flag("--json", a.json, "Print the result as one JSON object");
  cmd->callback([args]() {
    Status s = RunEval(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln eval: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
