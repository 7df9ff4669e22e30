// W8A8 behind Backend::PackWeight: the compiler asks in backend-neutral
// terms (int8, an activation clip) and the CPU backend decides which
// weights take it: the decoder layers' matrices of linear nodes.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "format/weight_store.h"

namespace kiln {
namespace w8a8_pack_request_tests {

ModelConfig TinyConfig() {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 1;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

std::string Layout(const Weight* w, OpKind op, bool int8, float clip) {
  Node node;
  node.op = op;
  PackRequest r;
  r.weight = w;
  r.node = &node;
  r.int8 = int8;
  r.activation_clip = clip;
  auto m = BackendRegistry::Get().cpu().PackWeight(r);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? (*m)->layout() : "";
}

TEST(W8A8PackRequest, TheCpuPacksDecoderLayerMatricesOfLinearsInInt8) {
  auto store = WeightStore::Dummy(TinyConfig(), DType::kF32, 3);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Weight* down = (*store)->Find("model.layers.0.mlp.down_proj.weight");
  const Weight* head = (*store)->Find("lm_head.weight");
  ASSERT_NE(down, nullptr);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(Layout(down, OpKind::kLinear, false, 0), "panel16-f32");
  EXPECT_EQ(Layout(down, OpKind::kLinear, true, 0), "w8a8-int8-panel16 (dynamic)");
  EXPECT_EQ(Layout(down, OpKind::kGateUpSiluMul, true, 2.5f), "w8a8-int8-panel16 (static clip 2.5)");
  // The output head keeps its type; so does a matrix no linear reads.
  EXPECT_EQ(Layout(head, OpKind::kLinear, true, 0), "panel16-f32");
  EXPECT_EQ(Layout(down, OpKind::kEmbedding, true, 0), "panel16-f32");
}

TEST(W8A8PackRequest, BadRequestsAreErrorsNamingWhatIsWrong) {
  auto store = WeightStore::Dummy(TinyConfig(), DType::kF32, 3);
  ASSERT_TRUE(store.ok());
  Backend& cpu = BackendRegistry::Get().cpu();
  EXPECT_FALSE(cpu.PackWeight(PackRequest{}).ok());
  Node linear;
  linear.op = OpKind::kLinear;
  PackRequest r;
  r.weight = (*store)->Find("model.layers.0.self_attn.q_proj.weight");
  r.node = &linear;
  r.int8 = true;
  r.activation_clip = -1.0f;
  auto m = cpu.PackWeight(r);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("q_proj"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("clip"), std::string::npos) << m.status().message();
}

TEST(W8A8PackRequest, CompileOptionsAskEveryLayerLinearOnTheCpu) {
  auto store = WeightStore::Dummy(TinyConfig(), DType::kF32, 3);
  ASSERT_TRUE(store.ok());
  CompileOptions o;
  o.precision = Precision::kFp32;
  o.max_batch_tokens = 4;
  o.threads = 1;
  o.w8a8.enabled = true;
  o.w8a8.input_clips["model.layers.0.mlp.down_proj.weight"] = 3.0f;
  auto model = CompiledModel::Compile(**store, o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  int int8 = 0;
  for (const PackedWeightInfo& p : (*model)->report().layout.packed) {
    const bool layer = p.weight.rfind("model.layers.", 0) == 0;
    EXPECT_EQ(p.layout.rfind("w8a8-int8", 0) == 0, layer) << p.weight << ": " << p.layout;
    if (p.weight == "model.layers.0.mlp.down_proj.weight") {
      EXPECT_EQ(p.layout, "w8a8-int8-panel16 (static clip 3)");
    }
    int8 += layer ? 1 : 0;
  }
  EXPECT_EQ(int8, 7);  // q k v o gate up down
}

}  // namespace w8a8_pack_request_tests
}  // namespace kiln
