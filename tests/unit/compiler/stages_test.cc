// The compiler stages one at a time: legalize against partial support
// lists, fusion patterns, transfers and the memory plan.
#include <gtest/gtest.h>

#include <map>

#include "backend/backend.h"
#include "compiler/fuse.h"
#include "compiler/layout.h"
#include "compiler/legalize.h"
#include "compiler_test_util.h"
#include "models/decoder_builder.h"

namespace kiln {
namespace stages_tests {

Graph Build(const WeightStore& store) {
  auto g = BuildDecoderGraph(store);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

const ShapeEnv kCostEnv{1, 1, 128, 128};

TEST(Legalize, EverythingFitsTheCpu) {
  auto store = testing::SmallModel(Architecture::kLlama);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport report;
  ASSERT_TRUE(Legalize(g, r.cpu(), r.cpu(), kCostEnv, &report).ok());
  EXPECT_TRUE(report.fallbacks.empty());
  for (const Node& n : g.nodes()) EXPECT_EQ(n.backend, "cpu");
}

TEST(Legalize, PartialBackendFallsBackWithReasonsAndCosts) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport report;
  ASSERT_TRUE(Legalize(g, *r.Find("testaccel"), r.cpu(), kCostEnv, &report).ok());
  std::map<OpKind, int> fallbacks;
  for (const Fallback& f : report.fallbacks) {
    fallbacks[f.op] += 1;
    EXPECT_FALSE(f.reason.empty());
    EXPECT_GT(f.bytes_moved, 0);
  }
  EXPECT_EQ(fallbacks[OpKind::kEmbedding], 1);
  EXPECT_EQ(fallbacks[OpKind::kRope], 4);
  EXPECT_EQ(fallbacks[OpKind::kAttention], 2);
  EXPECT_EQ(fallbacks[OpKind::kKvWrite], 2);
  EXPECT_EQ(fallbacks[OpKind::kLinear], 0);  // f32 weights fit
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::kLinear) {
      EXPECT_EQ(n.backend, "testaccel");
    }
    if (n.op == OpKind::kAttention) {
      EXPECT_EQ(n.backend, "cpu");
    }
  }
}

TEST(Legalize, WeightDtypeOutsideTheListFallsBack) {
  auto store = testing::SmallModel(Architecture::kLlama, DType::kBF16);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport report;
  ASSERT_TRUE(Legalize(g, *r.Find("testaccel"), r.cpu(), kCostEnv, &report).ok());
  int linear_fallbacks = 0;
  for (const Fallback& f : report.fallbacks) {
    if (f.op != OpKind::kLinear) continue;
    ++linear_fallbacks;
    EXPECT_NE(f.reason.find("dtype bf16"), std::string::npos) << f.reason;
    EXPECT_GT(f.flops, 0);
  }
  EXPECT_EQ(linear_fallbacks, 7 * 2 + 1);
}

TEST(Legalize, DecomposesAttentionForAMatmulBackend) {
  auto store = testing::SmallModel(Architecture::kLlama);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport report;
  ASSERT_TRUE(Legalize(g, *r.Find("testaccel-mm"), r.cpu(), kCostEnv, &report).ok());
  EXPECT_EQ(report.rewrites.size(), 2u);
  std::map<OpKind, std::string> placement;
  for (const Node& n : g.nodes()) placement[n.op] = n.backend;
  EXPECT_EQ(placement.count(OpKind::kAttention), 0u);
  EXPECT_EQ(placement[OpKind::kAttnScores], "testaccel-mm");
  EXPECT_EQ(placement[OpKind::kMaskedSoftmax], "testaccel-mm");
  EXPECT_EQ(placement[OpKind::kAttnValues], "testaccel-mm");
  EXPECT_EQ(placement[OpKind::kGatherKv], "cpu");  // its list lacks the gather
}

TEST(Fuse, FusesProjectionsGateUpAndResidualNorms) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport lr;
  ASSERT_TRUE(Legalize(g, r.cpu(), r.cpu(), kCostEnv, &lr).ok());
  FuseReport fr;
  FuseOptions options;
  options.precision = Precision::kFp32;
  ASSERT_TRUE(Fuse(g, r, options, &fr).ok());
  std::map<OpKind, int> ops;
  for (const Node& n : g.nodes()) ops[n.op] += 1;
  // Per layer: one fused qkv linear, o_proj, down_proj; plus lm_head.
  EXPECT_EQ(ops[OpKind::kLinear], 3 * 2 + 1);
  EXPECT_EQ(ops[OpKind::kGateUpSiluMul], 2);
  EXPECT_EQ(ops[OpKind::kSiluMul], 0);
  // Every residual add but the last layer's output feeds a norm.
  EXPECT_EQ(ops[OpKind::kAddRmsNorm], 3);
  EXPECT_EQ(ops[OpKind::kAdd], 1);
  // The fused qkv carries three weights and three biases, and q/k/v are views.
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::kLinear && n.fused_from.size() == 3) {
      EXPECT_EQ(n.weights.size(), 6u);
      EXPECT_NE(n.weights[3], nullptr);
      EXPECT_EQ(g.value(n.outputs[0]).cols, 32 + 16 + 16);
    }
  }
  int views = 0;
  for (const Value& v : g.values()) views += v.view_of != kNoValue ? 1 : 0;
  EXPECT_EQ(views, 3 * 2 + 2 * 2);
}

TEST(Fuse, Bf16PolicyCastsMatmulInputs) {
  auto store = testing::SmallModel(Architecture::kLlama, DType::kBF16);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport lr;
  ASSERT_TRUE(Legalize(g, r.cpu(), r.cpu(), kCostEnv, &lr).ok());
  FuseReport fr;
  FuseOptions options;
  options.precision = Precision::kBf16;
  ASSERT_TRUE(Fuse(g, r, options, &fr).ok());
  int casts = 0;
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::kCast) ++casts;
    if (n.op == OpKind::kLinear || n.op == OpKind::kGateUpSiluMul) {
      EXPECT_EQ(g.value(n.inputs[0]).dtype, DType::kBF16) << n.name;
    }
    // Norms and attention stay fp32.
    if (n.op == OpKind::kRmsNorm || n.op == OpKind::kAttention) {
      EXPECT_EQ(g.value(n.inputs[0]).dtype, DType::kF32) << n.name;
    }
  }
  EXPECT_EQ(casts, fr.casts_inserted);
  EXPECT_GT(casts, 0);
}

TEST(Layout, TransfersWhereDomainsChange) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport lr;
  ASSERT_TRUE(Legalize(g, *r.Find("testaccel"), r.cpu(), kCostEnv, &lr).ok());
  FuseReport fr;
  ASSERT_TRUE(Fuse(g, r, FuseOptions{}, &fr).ok());
  LayoutReport report;
  ASSERT_TRUE(AssignDomainsAndTransfers(g, r, &report).ok());
  EXPECT_FALSE(report.transfers.empty());
  // Every node reads only values in its own domain.
  for (const Node& n : g.nodes()) {
    if (n.op == OpKind::kTransfer) continue;  // transfers read across by design
    int32_t d = r.Find(n.backend)->domain().id();
    for (ValueId in : n.inputs) {
      if (g.value(in).is_marker()) continue;
      EXPECT_EQ(g.value(in).domain, d) << n.name << " reads " << g.value(in).name;
    }
  }
  // The logits end in host memory.
  for (const Value& v : g.values()) {
    if (v.is_output) {
      EXPECT_EQ(v.domain, HostMemory().id());
    }
  }
}

TEST(Layout, MemoryPlanReusesBuffersWithoutOverlap) {
  auto store = testing::SmallModel(Architecture::kLlama);
  Graph g = Build(*store);
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport lr;
  ASSERT_TRUE(Legalize(g, r.cpu(), r.cpu(), kCostEnv, &lr).ok());
  FuseReport fr;
  ASSERT_TRUE(Fuse(g, r, FuseOptions{}, &fr).ok());
  LayoutReport report;
  ASSERT_TRUE(AssignDomainsAndTransfers(g, r, &report).ok());
  ShapeEnv env{64, 64, 0, 0};
  auto plan = PlanMemory(g, env, std::vector<size_t>(g.nodes().size(), 0));
  ASSERT_TRUE(plan.ok());
  EXPECT_LT(plan->arena_bytes.at(0), plan->naive_bytes.at(0) / 2);
  std::vector<BufferSlot> slots;
  for (const auto& [v, s] : plan->values) slots.push_back(s);
  for (const BufferSlot& s : slots) EXPECT_EQ(s.offset % 64, 0u);
  for (size_t i = 0; i < slots.size(); ++i) {
    for (size_t j = i + 1; j < slots.size(); ++j) {
      const BufferSlot& a = slots[i];
      const BufferSlot& b = slots[j];
      bool alive_together = !(a.last_node < b.first_node || b.last_node < a.first_node);
      bool share_bytes = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(alive_together && share_bytes);
    }
  }
}

}  // namespace stages_tests
}  // namespace kiln
