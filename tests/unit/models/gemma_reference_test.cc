// Gemma 2 and Gemma 3 (text) against an independent PyTorch implementation
// of the published architectures (tests/tools/gemma_reference.py): a small
// model with both kinds of layers and a window shorter than the prompt,
// through the paged kernel and the decomposed path, prefilled in chunks of
// several sizes; then greedy continuation. The same weights written as GGUF
// with llama.cpp's names and conventions (norms stored as 1 + w) load to the
// same results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "format/gguf_writer.h"
#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace {

std::string MakeModel(const std::string& arch, const std::string& variant = "") {
  std::string dir = testing::MakeTempDir();
  std::string cmd = "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 /usr/bin/python3 " + testing::SourceDir() +
                    "/tests/tools/gemma_reference.py " + dir + " " + arch + " " + variant;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Writes the Hugging Face model in `dir` as dir/model.gguf the way
// llama.cpp's converter does: its tensor names, the norms' weights with the
// 1 added (as the Hugging Face load has them), its metadata keys.
std::string WriteGguf(const std::string& dir, const std::string& arch) {
  auto hf = WeightStore::Open(dir);
  EXPECT_TRUE(hf.ok()) << hf.status().ToString();
  if (!hf.ok()) return "";
  const ModelConfig& c = (*hf)->config();
  GgufWriter w;
  auto key = [&](const char* k) { return arch + "." + k; };
  EXPECT_TRUE(w.SetString("general.architecture", arch).ok());
  EXPECT_TRUE(w.SetU32(key("context_length"), static_cast<uint32_t>(c.max_position_embeddings)).ok());
  EXPECT_TRUE(w.SetU32(key("embedding_length"), static_cast<uint32_t>(c.hidden_size)).ok());
  EXPECT_TRUE(w.SetU32(key("block_count"), static_cast<uint32_t>(c.num_layers)).ok());
  EXPECT_TRUE(w.SetU32(key("feed_forward_length"), static_cast<uint32_t>(c.intermediate_size)).ok());
  EXPECT_TRUE(w.SetU32(key("attention.head_count"), static_cast<uint32_t>(c.num_heads)).ok());
  EXPECT_TRUE(w.SetU32(key("attention.head_count_kv"), static_cast<uint32_t>(c.num_kv_heads)).ok());
  EXPECT_TRUE(w.SetU32(key("attention.key_length"), static_cast<uint32_t>(c.head_dim)).ok());
  EXPECT_TRUE(w.SetU32(key("attention.value_length"), static_cast<uint32_t>(c.head_dim)).ok());
  EXPECT_TRUE(w.SetF32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps)).ok());
  EXPECT_TRUE(w.SetF32(key("rope.freq_base"), static_cast<float>(c.rope_theta)).ok());
  EXPECT_TRUE(w.SetU32(key("attention.sliding_window"), static_cast<uint32_t>(c.sliding_window)).ok());
  if (c.attn_logit_softcap > 0) {
    EXPECT_TRUE(w.SetF32(key("attn_logit_softcapping"), static_cast<float>(c.attn_logit_softcap)).ok());
    EXPECT_TRUE(w.SetF32(key("final_logit_softcapping"), static_cast<float>(c.final_logit_softcap)).ok());
  }
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    EXPECT_TRUE(w.SetString(key("rope.scaling.type"), "linear").ok());
    EXPECT_TRUE(w.SetF32(key("rope.scaling.factor"), static_cast<float>(c.rope_scaling.factor)).ok());
  }
  const std::pair<std::string, std::string> layer_names[] = {
      {"input_layernorm", "attn_norm"},         {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},           {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},      {"post_attention_layernorm", "attn_post_norm"},
      {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
      {"mlp.gate_proj", "ffn_gate"},            {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
  };
  for (const Weight& t : (*hf)->weights()) {
    std::string name;
    if (t.name == weight_names::Embedding()) name = "token_embd.weight";
    if (t.name == weight_names::FinalNorm()) name = "output_norm.weight";
    for (int64_t l = 0; l < c.num_layers && name.empty(); ++l) {
      for (const auto& [hf_name, gguf_name] : layer_names) {
        if (t.name == weight_names::Layer(l, hf_name + ".weight")) name = fmt::format("blk.{}.{}.weight", l, gguf_name);
      }
    }
    EXPECT_FALSE(name.empty()) << t.name;
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    EXPECT_TRUE(w.AddTensor(name, t.dtype, t.shape, t.data, t.nbytes).ok()) << name;
  }
  const std::string path = dir + "/model.gguf";
  Status written = w.Write(path);
  EXPECT_TRUE(written.ok()) << written.ToString();
  return path;
}

void CheckAgainstReference(const std::string& arch, Architecture expected_arch, const std::string& variant = "",
                           bool from_gguf = false) {
  std::string dir = MakeModel(arch, variant);
  const std::string model_path = from_gguf ? WriteGguf(dir, arch) : dir;
  auto ref = testing::LoadJson(dir + "/reference.json");
  auto ids = testing::Ids(ref["input_ids"]);
  std::vector<float> expected;
  for (const auto& row : ref["logits"]) {
    auto r = testing::Floats(row);
    expected.insert(expected.end(), r.begin(), r.end());
  }
  float largest = 1.0f;
  for (float v : expected) largest = std::max(largest, std::fabs(v));
  const float tolerance = 1e-4f * largest;
  const auto greedy = ref["greedy"].get<std::vector<int32_t>>();
  const auto margins = ref["margins"].get<std::vector<double>>();
  // Tokens are compared up to the first step whose top two logits are too
  // close to tell apart at the logits' tolerance.
  size_t decided = 0;
  while (decided < margins.size() && margins[decided] > 3e-3) ++decided;
  ASSERT_GT(decided, 0u) << "the reference's first step is a near tie";

  for (const char* backend : {"cpu", "testaccel-mm"}) {
    CompileOptions o = testing::Fp32();
    o.backend = backend;
    auto m = testing::Load(model_path, o);
    ASSERT_NE(m.model, nullptr);
    const ModelConfig& c = m.model->config();
    EXPECT_EQ(c.arch, expected_arch);
    EXPECT_EQ(c.sliding_window, ref["window"].get<int64_t>());
    for (int64_t chunk : {1, 4, 64}) {
      testing::DirectRunner runner(*m.model, 1, 64);
      auto logits = runner.Prefill({ids}, chunk, true);
      EXPECT_LT(testing::MaxAbsDiff(logits[0], expected), tolerance) << backend << " chunk " << chunk;
    }
    testing::DirectRunner runner(*m.model, 1, 64);
    auto tokens = runner.Greedy(ids, static_cast<int>(greedy.size()));
    ASSERT_EQ(tokens.size(), greedy.size());
    for (size_t i = 0; i < decided; ++i) EXPECT_EQ(tokens[i], greedy[i]) << backend << " step " << i;
  }
}

TEST(GemmaReference, Gemma3LogitsAndGreedyMatchPyTorch) {
  CheckAgainstReference("gemma3", Architecture::kGemma3);
}

TEST(GemmaReference, Gemma2LogitsAndGreedyMatchPyTorch) {
  CheckAgainstReference("gemma2", Architecture::kGemma2);
}

TEST(GemmaReference, Gemma3FromGgufMatchesPyTorch) {
  CheckAgainstReference("gemma3", Architecture::kGemma3, "llama.cpp", true);
}

TEST(GemmaReference, Gemma2FromGgufMatchesPyTorch) {
  CheckAgainstReference("gemma2", Architecture::kGemma2, "llama.cpp", true);
}

TEST(GemmaReference, Gemma3LayerKindsAndRopeBases) {
  auto w = WeightStore::Open(MakeModel("gemma3"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const ModelConfig& c = (*w)->config();
  EXPECT_TRUE(c.gemma_norms);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(c.LayerSlides(l), (l + 1) % 3 != 0) << l;
    EXPECT_EQ(c.LayerRopeTheta(l), c.LayerSlides(l) ? 10000.0 : 1000000.0) << l;
  }
  EXPECT_DOUBLE_EQ(c.AttentionScale(), 1.0 / std::sqrt(24.0));
  EXPECT_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_EQ(c.final_logit_softcap, 0.0);
}

}  // namespace
}  // namespace kiln
