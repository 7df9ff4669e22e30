// A mixture's k-quant experts run on their x8 copy, which serves every row
// count (a Q4_K_M file's Q4_K and Q6_K): the packed layout says so, and the
// logits are bit for bit those of the same weights on their rows
// (KILN_X8=0), for a prompt in one pass (each expert's many rows) and in
// chunks of 5 beside another prompt (few rows, the chosen experts joint).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/isa.h"
#include "compiler/compiled_model.h"
#include "compiler/layout.h"
#include "format/weight_store.h"
#include "model_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace moe_kquant_x8_tests {

// Qwen3-MoE at widths the k-quants' 256-value blocks divide: four experts,
// two a token, in two layers.
ModelConfig MoeConfig() {
  ModelConfig c;
  c.arch = Architecture::kQwen3Moe;
  c.hf_architecture = "Qwen3MoeForCausalLM";
  c.vocab_size = 96;
  c.hidden_size = 256;
  c.intermediate_size = 512;  // no dense layers: unused
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.qk_norm = true;
  c.num_experts = 4;
  c.experts_per_token = 2;
  c.expert_intermediate_size = 256;
  c.normalize_expert_weights = true;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

struct Outputs {
  std::vector<std::vector<float>> alone, chunked;  // logits of every position
  std::vector<std::string> expert_layouts;
};

// Compiles `weights` with KILN_X8 as given ("" for unset) and runs the
// prompts: `prompt` alone in one pass, then in chunks of 5 beside `other`.
Outputs Compute(const WeightStore& weights, const char* x8_env, const std::vector<int32_t>& prompt,
            const std::vector<int32_t>& other) {
  Outputs run;
  if (*x8_env != '\0') {
    setenv("KILN_X8", x8_env, 1);
  } else {
    unsetenv("KILN_X8");
  }
  auto model = CompiledModel::Compile(weights, testing::Fp32());
  unsetenv("KILN_X8");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return run;
  for (const PackedWeightInfo& p : (*model)->report().layout.packed) {
    if (p.weight.find("experts") != std::string::npos) run.expert_layouts.push_back(p.layout);
  }
  testing::DirectRunner alone(**model, 1, 64);
  run.alone = alone.Prefill({prompt}, 64, true);
  testing::DirectRunner together(**model, 2, 64);
  run.chunked = together.Prefill({other, prompt}, 5, true);
  return run;
}

TEST(MoeKQuantX8, ExpertsOnTheCopyGiveTheBitsOfTheirRows) {
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(48), other(13);
  for (int32_t& id : prompt) id = static_cast<int32_t>(3 + rng() % 90);
  for (int32_t& id : other) id = static_cast<int32_t>(3 + rng() % 90);
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(dtype));
    auto weights = WeightStore::Dummy(MoeConfig(), dtype, 5);
    ASSERT_TRUE(weights.ok()) << weights.status().ToString();
    const Outputs rows = Compute(**weights, "0", prompt, other);
    const Outputs x8 = Compute(**weights, "", prompt, other);
    const std::string name = DTypeName(dtype);
    ASSERT_FALSE(x8.expert_layouts.empty());
    // The scalar kernels read the rows: no copy is made for them (KILN_ISA=scalar).
    const bool copied = cpu::BestIsa() != cpu::Isa::kScalar;
    for (const std::string& layout : x8.expert_layouts) EXPECT_EQ(layout, name + (copied ? "-x8" : "-rows"));
    for (const std::string& layout : rows.expert_layouts) EXPECT_EQ(layout, name + "-rows");
    ASSERT_EQ(rows.alone.size(), 1u);
    ASSERT_EQ(x8.alone.size(), 1u);
    ASSERT_EQ(x8.chunked.size(), 2u);
    ASSERT_EQ(rows.alone[0].size(), prompt.size() * 96);
    EXPECT_TRUE(x8.alone[0] == rows.alone[0]) << "one pass: max diff " << testing::MaxAbsDiff(x8.alone[0], rows.alone[0]);
    EXPECT_TRUE(x8.chunked[1] == rows.alone[0]) << "chunks of 5";
    EXPECT_TRUE(rows.chunked[1] == rows.alone[0]) << "chunks of 5 on the rows";
  }
}

}  // namespace moe_kquant_x8_tests
}  // namespace kiln
