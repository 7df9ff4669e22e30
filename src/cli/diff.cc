// `kiln diff`: runs two models, or two configurations of one, on the same
// prompt and compares every named intermediate value layer by layer, to find
// where a quantization, a precision or a backend starts to go wrong.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "accuracy/tensor_compare.h"
#include "cli/commands.h"
#include "cli/diff_onnx.h"
#include "cli/inspect_onnx.h"
#include "cli/engine_flags.h"
#include "engine/model_session.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"

namespace kiln::cli {
namespace {

// Exit statuses: the comparison ran and passed, fell below --fail-below, or
// could not run.
constexpr int kBelowThreshold = 1;
constexpr int kError = 2;

struct Side {
  std::string model;
  std::string precision;  // "": mixed, or fp32 for ONNX graphs
  std::string kv_cache_dtype = "f32";
  std::string backend = "cpu";
  bool w8a8 = false;  // activations quantized per token at run time
  bool no_fuse = false;  // ONNX graphs: compile without the fusions
};

struct DiffArgs {
  Side a, b;
  std::string prompt;
  double threshold = 0.99;
  double fail_below = -1;  // unset
  std::string values = "invariant";
  int threads = 0;
  bool json = false;
  // ONNX graphs.
  std::vector<std::string> inputs, input_shapes, fixed_inputs;
  std::string against;
};

// One run of one side on `ids`, all positions' values captured.
Expected<std::vector<CapturedValue>> RunSide(const Side& side, const std::vector<int32_t>& ids, int threads,
                                             int64_t* vocab_out) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> weights, WeightStore::Open(side.model));
  ModelSessionOptions so;
  so.backend = side.backend;
  KILN_ASSIGN_OR_RETURN(so.precision, ParsePrecisionFlag(side.precision, Precision::kMixed));
  KILN_ASSIGN_OR_RETURN(so.kv_dtype, ParseKvCacheDType(side.kv_cache_dtype));
  so.max_batch_tokens = static_cast<int64_t>(ids.size());
  so.max_seqs = 1;
  so.threads = threads;
  so.w8a8 = side.w8a8;
  so.kv_tokens_per_seq = static_cast<int64_t>(ids.size());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelSession> session, ModelSession::Create(*weights, so));
  const int64_t vocab = session->config().vocab_size;
  *vocab_out = vocab;
  if (static_cast<int64_t>(ids.size()) > session->max_model_len()) {
    return OutOfRange("prompt of {} tokens beyond the model's context of {}", ids.size(),
                      session->max_model_len());
  }
  std::vector<int32_t> rows(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) rows[i] = static_cast<int32_t>(i);
  std::vector<float> logits(ids.size() * static_cast<size_t>(vocab));
  ValueCapture capture;
  KILN_RETURN_IF_ERROR(session->ForwardSequence(ids, 0, rows, logits.data(), &capture.fn()));
  KILN_RETURN_IF_ERROR(capture.status());
  return capture.values();
}

std::string SideLabel(const Side& s) {
  return fmt::format("{} (precision {}, kv {}, backend {}{})", s.model, s.precision, s.kv_cache_dtype, s.backend,
                     s.w8a8 ? ", w8a8" : "");
}

// Compares two runs of an LLM on the prompt.
Expected<DiffComparison> CompareLlm(const DiffArgs& args) {
  if (args.prompt.empty()) return InvalidArgument("no prompt: give --prompt TEXT");
  Side b = args.b;
  if (b.model.empty()) b.model = args.a.model;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(args.a.model));
  const std::vector<int32_t> ids = tokenizer->Encode(args.prompt, /*add_special=*/true);
  if (ids.empty()) return InvalidArgument("the prompt has no tokens");

  int64_t vocab_a = 0, vocab_b = 0;
  auto values_a = RunSide(args.a, ids, args.threads, &vocab_a);
  if (!values_a.ok()) return values_a.status().WithContext("A");
  auto values_b = RunSide(b, ids, args.threads, &vocab_b);
  if (!values_b.ok()) return values_b.status().WithContext("B");
  if (vocab_a != vocab_b) return InvalidArgument("A has {} tokens in its vocabulary, B {}", vocab_a, vocab_b);

  std::function<bool(const std::string&)> keep;
  if (args.values == "invariant") keep = IsLayoutInvariantValue;
  DiffComparison c;
  c.a = SideLabel(args.a);
  c.b = SideLabel(b);
  c.input = fmt::format("prompt: {} tokens", ids.size());
  c.tokens = static_cast<int64_t>(ids.size());
  c.rows = DiffValues(*values_a, *values_b, keep);
  return c;
}

// Returns the exit status.
Expected<int> RunDiff(const DiffArgs& args) {
  if (args.a.model.empty()) return InvalidArgument("no model A");
  DiffComparison c;
  if (IsOnnxModelPath(args.a.model)) {
    OnnxDiffArgs o;
    o.model = args.a.model;
    o.inputs = args.inputs;
    o.input_shapes = args.input_shapes;
    o.fixed_inputs = args.fixed_inputs;
    o.against = args.against;
    o.threads = args.threads;
    o.a_backend = args.a.backend;
    o.b_backend = args.b.backend;
    o.a_fuse = !args.a.no_fuse;
    o.a_precision = args.a.precision;
    o.b_precision = args.b.precision;
    o.b_fuse = !args.b.no_fuse;
    KILN_ASSIGN_OR_RETURN(c, CompareOnnx(o));
  } else {
    KILN_ASSIGN_OR_RETURN(c, CompareLlm(args));
  }
  const std::vector<DiffRow>& rows = c.rows;
  if (rows.empty()) return InvalidArgument("A and B have no value of the same name and shape to compare");
  const int64_t first = FirstBelow(rows, args.threshold);
  double min_cosine = 1;
  for (const DiffRow& r : rows) min_cosine = std::min(min_cosine, r.stats.cosine);
  const bool failed = args.fail_below >= 0 && !(min_cosine >= args.fail_below);

  if (args.json) {
    nlohmann::ordered_json j;
    j["a"] = c.a;
    j["b"] = c.b;
    if (c.tokens >= 0) j["tokens"] = c.tokens;
    j["threshold"] = args.threshold;
    j["values"] = nlohmann::json::array();
    for (const DiffRow& r : rows) {
      j["values"].push_back({{"name", r.name},
                             {"layer", r.layer},
                             {"shape", {r.rows, r.cols}},
                             {"cosine", r.stats.cosine},
                             {"max_abs", r.stats.max_abs},
                             {"mean_abs", r.stats.mean_abs}});
    }
    j["first_below"] = first >= 0 ? nlohmann::json(rows[static_cast<size_t>(first)].name) : nlohmann::json();
    j["min_cosine"] = min_cosine;
    j["failed"] = failed;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("A: {}\nB: {}\n{}; {} values compared\n\n", c.a, c.b, c.input, rows.size());
    fmt::print("{:>5}  {:<28} {:>12} {:>12} {:>12}\n", "layer", "tensor", "cosine", "max abs", "mean abs");
    for (const DiffRow& r : rows) {
      fmt::print("{:>5}  {:<28} {:>12.6f} {:>12.4g} {:>12.4g}{}\n", r.layer >= 0 ? fmt::format("{}", r.layer) : "-",
                 r.name, r.stats.cosine, r.stats.max_abs, r.stats.mean_abs,
                 !(r.stats.cosine >= args.threshold) ? "  <" : "");
    }
    if (first >= 0) {
      const DiffRow& r = rows[static_cast<size_t>(first)];
      fmt::print("\nfirst below {}: {} (layer {}, cosine {:.6f})\n", args.threshold, r.name,
                 r.layer >= 0 ? fmt::format("{}", r.layer) : "-", r.stats.cosine);
    } else {
      fmt::print("\nevery value has cosine >= {} (lowest {:.6f})\n", args.threshold, min_cosine);
    }
    if (failed) fmt::print("FAIL: lowest cosine {:.6f} is below {}\n", min_cosine, args.fail_below);
  }
  return failed ? kBelowThreshold : 0;
}

}  // namespace

void RegisterDiff(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "diff",
      "Run two models (or two configurations of one) on a prompt and compare their intermediate values layer "
      "by layer.\nExit status: 0 compared, 1 a value's cosine below --fail-below, 2 error.");
  auto args = std::make_shared<DiffArgs>();
  DiffArgs& a = *args;
  cmd->add_option("A", a.a.model, "The first model: a Hugging Face folder, a .gguf file or an .onnx file")->required();
  cmd->add_option("B", a.b.model, "The second model (default: A again, with B's options)");
  cmd->add_option("-p,--prompt", a.prompt, "The prompt both run on (tokenized with A's tokenizer); LLMs only");
  const std::string onnx = "ONNX graphs";
  cmd->add_option("--input", a.inputs, "NAME=FILE.npy (or .pb): a graph input (repeatable)")->group(onnx);
  cmd->add_option("--input-shape", a.input_shapes, "NAME:DIMS fixes an input's shape")->group(onnx);
  cmd->add_option("--fixed-input", a.fixed_inputs, "NAME: compile with this --input's value fixed")->group(onnx);
  cmd->add_option("--against", a.against,
                  "DIR: compare A with another runtime's intermediate values, DIR/<value name>.npy each "
                  "(tests/onnx_oracle/ort_run.js --all-intermediates writes onnxruntime's)")
      ->group(onnx);
  cmd->add_option("--threshold", a.threshold, "Report the first value whose cosine similarity is below this")
      ->capture_default_str();
  cmd->add_option("--fail-below", a.fail_below, "Exit with status 1 when any value's cosine is below this");
  cmd->add_option("--values", a.values,
                  "invariant: values every layout of the model shares (not q/k, which llama GGUFs permute); "
                  "all: every value of the same name and shape")
      ->check(CLI::IsMember({"invariant", "all"}))
      ->capture_default_str();
  cmd->add_option("--threads", a.threads, "Compute threads of both runs (0: one per physical core)");
  cmd->add_flag("--json", a.json, "Print the comparison as one JSON object");
  const std::string per_side = "Per side (A: --a-..., B: --b-...)";
  for (auto [prefix, side] : {std::pair<std::string, Side*>{"--a-", &a.a}, {"--b-", &a.b}}) {
    cmd->add_option(prefix + "precision", side->precision,
                    "fp32, mixed or bf16 (default: mixed; fp32 for ONNX graphs)")
        ->group(per_side);
    cmd->add_option(prefix + "kv-cache-dtype", side->kv_cache_dtype, "f32, f16, bf16 or int8")
        ->capture_default_str()
        ->group(per_side);
    cmd->add_option(prefix + "backend", side->backend, "The backend to compile for")
        ->capture_default_str()
        ->group(per_side);
    cmd->add_flag(prefix + "w8a8", side->w8a8, "W8A8: int8 weights and activations quantized per token")
        ->group(per_side);
    cmd->add_flag(prefix + "no-fuse", side->no_fuse, "ONNX graphs: compile without the fusions")->group(per_side);
  }
  cmd->callback([args]() {
    auto code = RunDiff(*args);
    if (!code.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "kiln diff: {}\n", code.status().ToString());
      SetExitCode(kError);
      return;
    }
    SetExitCode(*code);
  });
}

}  // namespace kiln::cli
