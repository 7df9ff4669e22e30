// Named node attributes: typed reads with errors that name the attribute,
// merging, RoPE's parameters recorded by the graph builder and read back,
// and attributes carried through fusion.
#include <gtest/gtest.h>

#include <map>

#include "backend/backend.h"
#include "compiler/fuse.h"
#include "compiler/legalize.h"
#include "compiler_test_util.h"
#include "graph/attribute_map.h"
#include "graph/rope_attributes.h"
#include "models/decoder_builder.h"

namespace kiln {
namespace node_attributes_tests {

TEST(AttributeMap, ReadsEachKindBackAndNamesWhatIsWrong) {
  AttributeMap a;
  a.SetInt("axis", -1);
  a.SetFloat("alpha", 0.25);
  a.SetString("mode", "linear");
  a.SetInts("perm", {0, 2, 1});
  a.SetFloats("scales", {1.0, 2.5});
  EXPECT_EQ(*a.Int("axis"), -1);
  EXPECT_EQ(*a.Float("alpha"), 0.25);
  EXPECT_EQ(*a.String("mode"), "linear");
  EXPECT_EQ(*a.Ints("perm"), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(*a.Floats("scales"), (std::vector<double>{1.0, 2.5}));
  EXPECT_TRUE(a.Has("mode"));
  EXPECT_FALSE(a.Has("other"));

  auto missing = a.Int("other");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'other'"), std::string::npos) << missing.status().message();
  auto wrong = a.Float("mode");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("'mode' is a string"), std::string::npos) << wrong.status().message();

  EXPECT_EQ(a.ToString(), "alpha=0.25 axis=-1 mode=\"linear\" perm=[0, 2, 1] scales=[1, 2.5]");
  EXPECT_EQ(AttributeMap().ToString(), "");
}

TEST(AttributeMap, MergesOnlyWhatAgrees) {
  AttributeMap a, b, c;
  a.SetInt("x", 1);
  b.SetInt("x", 1);
  b.SetString("y", "z");
  c.SetInt("x", 2);
  c.SetFloat("w", 3.0);
  ASSERT_TRUE(a.Merge(b));
  EXPECT_EQ(a, b);
  AttributeMap before = a;
  EXPECT_FALSE(a.Merge(c));
  EXPECT_EQ(a, before);  // unchanged: not even w was added
}

TEST(RopeAttributes, RoundTripEveryParameter) {
  RopeParameters p;
  p.rotary_dim = 64;
  p.theta = 500000.0;
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = 4.0;
  p.scaling.low_freq_factor = 1.5;
  p.scaling.high_freq_factor = 3.0;
  p.scaling.original_max_position_embeddings = 8192;
  p.scaling.beta_fast = 30.0;
  p.scaling.beta_slow = 0.5;
  p.scaling.attention_factor = 0.1;
  AttributeMap a;
  SetRopeAttributes(p, &a);
  auto back = RopeAttributes(a);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rotary_dim, 64);
  EXPECT_EQ(back->theta, 500000.0);
  EXPECT_EQ(back->scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(back->scaling.factor, 4.0);
  EXPECT_EQ(back->scaling.low_freq_factor, 1.5);
  EXPECT_EQ(back->scaling.high_freq_factor, 3.0);
  EXPECT_EQ(back->scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(back->scaling.beta_fast, 30.0);
  EXPECT_EQ(back->scaling.beta_slow, 0.5);
  EXPECT_EQ(back->scaling.attention_factor, 0.1);

  a.SetString("rope.scaling", "ntk");
  auto unknown = RopeAttributes(a);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'ntk'"), std::string::npos) << unknown.status().message();
  auto none = RopeAttributes(AttributeMap());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("rope."), std::string::npos) << none.status().message();
}

TEST(RopeAttributes, TheBuilderRecordsTheModelsRopeOnEveryRopeNode) {
  ModelConfig c = testing::SmallConfig(Architecture::kLlama);
  c.rope_theta = 123456.0;
  c.rope_scaling.type = RopeScalingType::kLlama3;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.original_max_position_embeddings = 64;
  auto store = WeightStore::Dummy(c, DType::kF32, 7);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto g = BuildDecoderGraph(**store);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  int ropes = 0;
  for (const Node& n : g->nodes()) {
    if (n.op != OpKind::kRope) {
      EXPECT_TRUE(n.named_attrs.empty()) << n.name;
      continue;
    }
    ++ropes;
    auto p = RopeAttributes(n.named_attrs);
    ASSERT_TRUE(p.ok()) << n.name << ": " << p.status().ToString();
    EXPECT_EQ(p->rotary_dim, c.head_dim);
    EXPECT_EQ(p->theta, 123456.0);
    EXPECT_EQ(p->scaling.type, RopeScalingType::kLlama3);
    EXPECT_EQ(p->scaling.factor, 8.0);
    EXPECT_EQ(p->scaling.original_max_position_embeddings, 64);
  }
  EXPECT_EQ(ropes, 2 * c.num_layers);
}

TEST(Fuse, FusedNodesCarryTheAttributesOfWhatTheyReplace) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  auto built = BuildDecoderGraph(*store);
  ASSERT_TRUE(built.ok());
  Graph g = std::move(built).value();
  // Tag the norms, the MLP's linears and activation, and q/k/v of layer 0;
  // layer 1's q disagrees with its k and v.
  for (Node& n : g.nodes()) {
    if (n.op == OpKind::kRmsNorm) n.named_attrs.SetString("tag", "norm");
    if (n.name.find("mlp.gate_proj") != std::string::npos || n.name.find("mlp.up_proj") != std::string::npos) {
      n.named_attrs.SetInt("mlp", 1);
    }
    if (n.op == OpKind::kSiluMul) n.named_attrs.SetFloat("act", 0.5);
    if (n.name.find("self_attn.") != std::string::npos && n.op == OpKind::kLinear &&
        n.name.find("o_proj") == std::string::npos) {
      const bool odd = n.name.find("layers.1.self_attn.q_proj") != std::string::npos;
      n.named_attrs.SetInt("qkv", odd ? 2 : 1);
    }
  }
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport lr;
  ASSERT_TRUE(Legalize(g, r.cpu(), r.cpu(), ShapeEnv{1, 1, 128, 128}, &lr).ok());
  FuseReport fr;
  FuseOptions options;
  options.precision = Precision::kFp32;
  ASSERT_TRUE(Fuse(g, r, options, &fr).ok());

  std::map<size_t, int> linears_by_parts;
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::kAddRmsNorm) {
      EXPECT_EQ(*n.named_attrs.String("tag"), "norm") << n.name;
    }
    if (n.op == OpKind::kGateUpSiluMul) {
      EXPECT_EQ(*n.named_attrs.Int("mlp"), 1) << n.name;
      EXPECT_EQ(*n.named_attrs.Float("act"), 0.5) << n.name;
    }
    if (n.op == OpKind::kLinear && n.named_attrs.Has("qkv")) {
      linears_by_parts[n.fused_from.size()] += 1;
      if (n.fused_from.size() == 2) {
        EXPECT_EQ(*n.named_attrs.Int("qkv"), 1) << n.name;
      }
    }
  }
  // Layer 0: q, k and v as one; layer 1: k and v as one, q alone.
  EXPECT_EQ(linears_by_parts[3], 1);
  EXPECT_EQ(linears_by_parts[2], 1);
  EXPECT_EQ(linears_by_parts[0], 1);
}

}  // namespace node_attributes_tests
}  // namespace kiln
