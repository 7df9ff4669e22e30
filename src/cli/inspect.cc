// `kiln inspect MODEL`: what a model is and what it needs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "cli/backend_plugin_flag.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/inspect_artifact.h"
#include "cli/inspect_onnx.h"
#include "cli/inspect_pipeline.h"
#include "compiler/compiled_model.h"
#include "core/byte_size.h"
#include "engine/model_session_options.h"
#include "format/artifact_file.h"
#include "format/gguf.h"
#include "format/presets.h"
#include "format/weight_store.h"
#include "tokenizer/tokenizer.h"
#include "vision/pipeline_artifact.h"

namespace kiln::cli {
namespace {

// 1262720 -> "1,262,720".
std::string GroupDigits(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

const char* RopeStyleName(RopeStyle s) {
  return s == RopeStyle::kHalf ? "half (rotate_half)" : "interleaved";
}

std::string ScalingText(const RopeScaling& rs) {
  switch (rs.type) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return fmt::format("linear, factor {}", rs.factor);
    case RopeScalingType::kLlama3:
      return fmt::format("llama3, factor {}, low/high freq factor {}/{}, original context {}", rs.factor,
                         rs.low_freq_factor, rs.high_freq_factor, rs.original_max_position_embeddings);
    case RopeScalingType::kYarn:
      return fmt::format("yarn, factor {}, original context {}, beta fast/slow {}/{}", rs.factor,
                         rs.original_max_position_embeddings, rs.beta_fast, rs.beta_slow);
    case RopeScalingType::kLongRope: {
      auto range = [](const std::vector<double>& f) {
        auto [lo, hi] = std::minmax_element(f.begin(), f.end());
        return f.empty() ? std::string("none") : fmt::format("{:.4g}..{:.4g}", *lo, *hi);
      };
      return fmt::format(
          "longrope, original context {} (long factors beyond it), short factors {}, long factors {}, "
          "attention factor {:.6g}",
          rs.original_max_position_embeddings, range(rs.short_factor), range(rs.long_factor),
          rs.LongRopeAttentionFactor());
    }
  }
  return "unknown";
}

std::string Ids(const std::vector<int64_t>& ids) {
  return ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", "));
}

// "f32 21, q8_0 29": counts in name order.
std::string Counts(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [name, count] : counts) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", name, count);
  }
  return out;
}

void PrintExperts(const ModelConfig& c) {
  if (c.num_experts == 0) return;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.LayerIsMoe(l) ? 1 : 0;
  fmt::print("experts: {}, {} per token, intermediate size {}, weights {}\n", c.num_experts,
             c.experts_per_token, c.expert_intermediate_size,
             c.normalize_expert_weights ? "renormalized to sum 1" : "softmax probabilities as they are");
  fmt::print("expert layers: {} of {}\n", moe_layers, c.num_layers);
  if (c.shared_expert_intermediate_size > 0) {
    fmt::print("shared expert: intermediate size {}, gated by sigmoid\n", c.shared_expert_intermediate_size);
  }
}

// What sets the architecture apart beyond its shapes: RoPE, norms,
// projections, sliding windows and Gemma's particulars (soft-capping).
void PrintArchitecture(const ModelConfig& c) {
  fmt::print("rope: theta {}, style {}, scaling {}\n", c.rope_theta, RopeStyleName(c.rope_style),
             ScalingText(c.rope_scaling));
  if (c.RotaryDim() != c.head_dim) fmt::print("rotary dims: {} of {} per head\n", c.RotaryDim(), c.head_dim);
  if (c.arch == Architecture::kPhi3) fmt::print("fused projections: qkv and gate/up, split at load\n");
  fmt::print("rms norm eps: {:g}\n", c.rms_norm_eps);
  fmt::print("tied embeddings: {}\n", c.tie_word_embeddings ? "yes" : "no");
  fmt::print("attention bias: {}, qk norm: {}\n", c.attention_bias ? "yes" : "no", c.qk_norm ? "yes" : "no");
  if (c.sliding_window > 0 && !c.sliding_layers.empty()) {
    std::vector<int64_t> global;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (!c.LayerSlides(l)) global.push_back(l);
    }
    fmt::print("sliding window: {} on {} of {} layers; global layers: {}\n", c.sliding_window,
               c.num_layers - static_cast<int64_t>(global.size()), c.num_layers,
               global.empty() ? "none" : fmt::format("{}", fmt::join(global, ", ")));
  } else {
    fmt::print("sliding window: {}\n", c.sliding_window > 0 ? std::to_string(c.sliding_window) : "none");
  }
  if (c.rope_local_theta > 0) fmt::print("sliding layers' rope: theta {}, unscaled\n", c.rope_local_theta);
  if (c.gemma_norms) {
    auto cap = [](double v) { return v > 0 ? fmt::format("{:g}", v) : std::string("none"); };
    fmt::print("norms: (1 + w), before and after each block; embeddings scaled by sqrt({})\n", c.hidden_size);
    fmt::print("attention scale: query_pre_attn_scalar {:g}\n",
               c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(c.head_dim));
    fmt::print("soft-capping: attention {}, final logits {}\n", cap(c.attn_logit_softcap),
               cap(c.final_logit_softcap));
  }
}

// A preset's shapes without weights: what it is and what it would need
// (matrices in each dtype, vectors in f32, as dummy weights store them).
Status PrintPreset(const std::string& name) {
  KILN_ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(name));
  fmt::print("preset: {}\n", name);
  fmt::print("architecture: {} ({})\n", ArchitectureName(c.arch), c.hf_architecture);
  fmt::print("parameters: {}\n", GroupDigits(c.ParameterCount()));
  if (c.num_experts > 0)
    fmt::print("active parameters per token: {}\n", GroupDigits(c.ActiveParameterCount()));
  fmt::print("context length: {}\n", c.max_position_embeddings);
  fmt::print("layers: {}\n", c.num_layers);
  fmt::print("hidden size: {}\n", c.hidden_size);
  fmt::print("heads: {}, kv heads: {}, head dim: {}\n", c.num_heads, c.num_kv_heads, c.head_dim);
  fmt::print("intermediate size: {}\n", c.intermediate_size);
  PrintExperts(c);
  fmt::print("vocab size: {}\n", c.vocab_size);
  PrintArchitecture(c);
  std::string memory;
  for (DType dtype : {DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    uint64_t bytes = 0;
    for (const WeightSpec& spec : RequiredWeights(c)) {
      uint64_t n = 1;
      for (int64_t d : spec.shape) n *= static_cast<uint64_t>(d);
      bytes += spec.shape.size() == 1 ? 4 * n : DTypeBytes(dtype, n).value_or(0);
    }
    memory += fmt::format("{}{} {}", memory.empty() ? "" : ", ", DTypeName(dtype),
                          MiBText(static_cast<int64_t>(bytes)));
  }
  fmt::print("memory for weights: {}\n", memory);
  fmt::print("kv cache per 1,000 tokens: f32 {}, bf16/f16 {}\n", MiBText(c.KvBytesPerToken(4) * 1000),
             MiBText(c.KvBytesPerToken(2) * 1000));
  return Status::Ok();
}

void PrintModel(const WeightStore& store) {
  const ModelConfig& c = store.config();
  std::map<std::string, int> file_dtypes;
  std::map<std::string, int> converted;
  for (const Weight& w : store.weights()) {
    ++file_dtypes[DTypeName(w.file_dtype)];
    if (w.dtype != w.file_dtype) {
      ++converted[fmt::format("{}->{}", DTypeName(w.file_dtype), DTypeName(w.dtype))];
    }
  }
  int64_t file_bytes = 0;
  for (const Weight& w : store.weights()) {
    file_bytes += static_cast<int64_t>(*DTypeBytes(w.file_dtype, w.num_elements()));
  }

  fmt::print("model: {}\n", store.path());
  fmt::print("format: {}\n", ModelFormatName(store.format()));
  fmt::print("architecture: {} ({})\n", ArchitectureName(c.arch), c.hf_architecture);
  fmt::print("parameters: {}\n", GroupDigits(c.ParameterCount()));
  if (c.num_experts > 0)
    fmt::print("active parameters per token: {}\n", GroupDigits(c.ActiveParameterCount()));
  fmt::print("tensors: {}, {} bytes\n", store.weights().size(), GroupDigits(file_bytes));
  fmt::print("dtypes: {}\n", Counts(file_dtypes));
  if (!converted.empty()) fmt::print("converted at load: {}\n", Counts(converted));
  if (const GgufFile* gguf = store.gguf()) {
    std::map<std::string, int> types;
    for (const auto& t : gguf->tensors()) ++types[GgmlTypeName(t.ggml_type)];
    fmt::print("gguf version: {}\n", gguf->version());
    fmt::print("file type: {}\n", gguf->FileTypeName().empty() ? "unknown" : gguf->FileTypeName());
    fmt::print("tensor types: {}\n", Counts(types));
  }
  fmt::print("context length: {}\n", c.max_position_embeddings);
  fmt::print("layers: {}\n", c.num_layers);
  fmt::print("hidden size: {}\n", c.hidden_size);
  fmt::print("heads: {}, kv heads: {}, head dim: {}\n", c.num_heads, c.num_kv_heads, c.head_dim);
  fmt::print("intermediate size: {}\n", c.intermediate_size);
  PrintExperts(c);
  fmt::print("vocab size: {}\n", c.vocab_size);
  PrintArchitecture(c);
  fmt::print("bos: {}, eos: {}\n", Ids(c.bos_token_ids), Ids(c.eos_token_ids));

  auto tokenizer =
      store.gguf() != nullptr ? LoadTokenizerFromGguf(*store.gguf()) : LoadTokenizer(store.path());
  if (tokenizer.ok()) {
    const Tokenizer& t = **tokenizer;
    fmt::print("tokenizer: {}, vocabulary {}, from {}\n", t.type(), GroupDigits(t.vocab_size()), t.source());
    auto piece = [&](int32_t id) {
      return id < 0 ? std::string("none") : fmt::format("{} {}", id, t.TokenPiece(id));
    };
    fmt::print("special tokens: bos {}, eos {}, unk {}; add bos: {}\n", piece(t.bos_id()), piece(t.eos_id()),
               piece(t.unk_id()), t.add_bos() ? "yes" : "no");
    std::string specials;
    for (const AddedToken& a : t.special_tokens()) {
      if (!a.special) continue;
      specials += fmt::format("{}{} {}", specials.empty() ? "" : ", ", a.id, a.content);
    }
    if (!specials.empty()) fmt::print("added special tokens: {}\n", specials);
    std::string eog;
    for (int32_t id : t.end_of_generation_ids())
      eog += fmt::format("{}{}", eog.empty() ? "" : ", ", piece(id));
    fmt::print("end-of-generation tokens: {}\n", eog.empty() ? "none" : eog);
    fmt::print("chat template: {}\n", t.chat_template().empty()
                                          ? "none"
                                          : fmt::format("present ({} bytes)", t.chat_template().size()));
  } else {
    fmt::print("tokenizer: none ({})\n", tokenizer.status().message());
  }

  fmt::print("memory for weights: {} ({} bytes)\n", MiBText(store.TotalBytes()),
             GroupDigits(store.TotalBytes()));
  fmt::print("kv cache per 1,000 tokens: f32 {}, bf16/f16 {}\n", MiBText(c.KvBytesPerToken(4) * 1000),
             MiBText(c.KvBytesPerToken(2) * 1000));
}

}  // namespace

void RegisterInspect(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("inspect", "Print a model's architecture, tensors, tokenizer and memory needs");
  struct Args {
    std::string model;
    bool plan = false;
    bool nodes = false;
    std::string backend = "cpu";
    std::string precision;  // "": mixed, or fp32 for ONNX graphs
    int64_t max_batch_tokens = 512;
    int threads = 0;
    bool w8a8 = false;
    bool verify = false;
    std::vector<std::string> backend_plugins;
    std::vector<std::string> input_shapes;
    std::string preset;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("model", a->model,
                  "A Hugging Face folder, a .gguf file, an .onnx file or a .kiln artifact");
  cmd->add_option("--preset", a->preset,
                  "Instead of a model: a preset's shapes and the memory its weights would need (" +
                      fmt::format("{}", fmt::join(PresetNames(), ", ")) + ")");
  cmd->add_flag("--plan", a->plan,
                "Compile the model and print the plan: placement, fallbacks, fusions, memory (for a .kiln "
                "artifact: the plan stored when it was compiled)");
  cmd->add_flag("--verify", a->verify,
                "For a .kiln artifact: check every section's checksum, weights included");
  cmd->add_flag("--nodes", a->nodes, "With --plan: one line per op with its backend");
  cmd->add_option("--backend", a->backend, "With --plan: the backend to compile for")->capture_default_str();
  AddBackendPluginFlag(cmd, &a->backend_plugins);
  cmd->add_option("--precision", a->precision,
                  "With --plan: fp32, mixed or bf16 (default: mixed; fp32 for ONNX graphs)");
  cmd->add_option("--max-num-batched-tokens", a->max_batch_tokens, "With --plan: the largest token bucket")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "With --plan: compute threads (0: one per physical core)");
  cmd->add_flag("--w8a8", a->w8a8, "With --plan: the decoder layers' linears repacked to int8 (W8A8)");
  cmd->add_option("--input-shape", a->input_shapes,
                  "For ONNX models: NAME:DIMS fixes an input's shape (repeatable)");
  cmd->callback([a]() {
    if (!a->preset.empty() || a->model.empty()) {
      Status printed = a->model.empty() == a->preset.empty()
                           ? InvalidArgument("give a model or --preset NAME (not both)")
                           : PrintPreset(a->preset);
      if (!printed.ok()) {
        fmt::print(stderr, "kiln inspect: {}\n", printed.ToString());
        SetExitCode(a->model.empty() == a->preset.empty() ? 2 : 1);
      }
      return;
    }
    if (IsOnnxPath(a->model)) {
      Status printed = PrintOnnxSummary(a->model, a->input_shapes);
      if (!printed.ok()) {
        fmt::print(stderr, "kiln inspect: {}\n", printed.ToString());
        SetExitCode(1);
      } else if (a->plan) {
        Status plugins = LoadBackendPlugins(a->backend_plugins);
        Status planned = plugins.ok() ? PrintOnnxPlan(a->model, a->input_shapes, a->backend, a->threads,
                                                      a->nodes, a->precision)
                                      : plugins;
        if (!planned.ok()) {
          fmt::print(stderr, "kiln inspect: {}\n", planned.ToString());
          SetExitCode(1);
        }
      }
      return;
    }
    if (IsPipelineArtifact(a->model)) {
      Status printed = PrintPipelineArtifact(a->model, a->verify, a->plan, a->nodes);
      if (!printed.ok()) {
        fmt::print(stderr, "kiln inspect: {}\n", printed.ToString());
        SetExitCode(1);
      }
      return;
    }
    if (IsArtifactFile(a->model)) {
      Status printed = PrintArtifact(a->model, a->verify, a->plan, a->nodes);
      if (!printed.ok()) {
        fmt::print(stderr, "kiln inspect: {}\n", printed.ToString());
        SetExitCode(1);
      }
      return;
    }
    auto store = WeightStore::Open(a->model);
    if (!store.ok()) {
      fmt::print(stderr, "kiln inspect: {}\n", store.status().ToString());
      SetExitCode(1);
      return;
    }
    PrintModel(**store);
    if (!a->plan) return;
    Status plugins = LoadBackendPlugins(a->backend_plugins);
    if (!plugins.ok()) {
      fmt::print(stderr, "kiln inspect: {}\n", plugins.ToString());
      SetExitCode(2);
      return;
    }
    ModelSessionOptions options;
    options.backend = a->backend;
    options.max_batch_tokens = a->max_batch_tokens;
    options.threads = a->threads;
    options.w8a8 = a->w8a8;
    auto precision = ParsePrecisionFlag(a->precision, Precision::kMixed);
    if (!precision.ok()) {
      fmt::print(stderr, "kiln inspect: --precision: {}\n", precision.status().message());
      SetExitCode(2);
      return;
    }
    options.precision = *precision;
    auto compiled = CompileForSession(**store, options);
    if (!compiled.ok()) {
      fmt::print(stderr, "kiln inspect: {}\n", compiled.status().ToString());
      SetExitCode(1);
      return;
    }
    fmt::print("\n{}", (*compiled)->report().ToString((*compiled)->graph(), a->nodes));
  });
}

}  // namespace kiln::cli
