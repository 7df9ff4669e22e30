// The decoder graph builder on the four architectures.
#include <gtest/gtest.h>

#include <map>

#include "compiler_test_util.h"
#include "models/decoder_builder.h"

namespace kiln {
namespace graph_builder_tests {

std::map<OpKind, int> CountOps(const Graph& g) {
  std::map<OpKind, int> counts;
  for (const Node& n : g.nodes()) counts[n.op] += 1;
  return counts;
}

TEST(DecoderBuilder, BuildsEveryArchitecture) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2,
                            Architecture::kQwen3}) {
    auto store = testing::SmallModel(arch);
    ASSERT_NE(store, nullptr) << ArchitectureName(arch);
    auto g = BuildDecoderGraph(*store);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(g->Validate().ok());
    auto ops = CountOps(*g);
    const int layers = 2;
    EXPECT_EQ(ops[OpKind::kEmbedding], 1);
    EXPECT_EQ(ops[OpKind::kAttention], layers);
    EXPECT_EQ(ops[OpKind::kKvWrite], layers);
    EXPECT_EQ(ops[OpKind::kRope], 2 * layers);
    EXPECT_EQ(ops[OpKind::kLinear], 7 * layers + 1);  // q k v o gate up down, lm_head
    EXPECT_EQ(ops[OpKind::kSiluMul], layers);
    EXPECT_EQ(ops[OpKind::kSelectRows], 1);
    // Norms: two per layer, the final one, and Qwen3's q and k norms.
    EXPECT_EQ(ops[OpKind::kRmsNorm], 2 * layers + 1 + (arch == Architecture::kQwen3 ? 2 * layers : 0));
    // Qwen2's q/k/v biases reach the linears.
    int biased = 0;
    for (const Node& n : g->nodes()) {
      if (n.op == OpKind::kLinear && n.weights[1] != nullptr) ++biased;
    }
    EXPECT_EQ(biased, arch == Architecture::kQwen2 ? 3 * layers : 0);
    // Mistral's window reaches attention.
    for (const Node& n : g->nodes()) {
      if (n.op == OpKind::kAttention) {
        EXPECT_EQ(n.attrs.sliding_window, arch == Architecture::kMistral ? 5 : 0);
      }
    }
    // The logits are the one graph output.
    int outputs = 0;
    for (const Value& v : g->values()) outputs += v.is_output ? 1 : 0;
    EXPECT_EQ(outputs, 1);
  }
}

TEST(DecoderBuilder, TiedModelsUseTheEmbeddingAsHead) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  ASSERT_NE(store, nullptr);
  auto g = BuildDecoderGraph(*store);
  ASSERT_TRUE(g.ok());
  const Node& head = g->nodes()[g->nodes().size() - 1];
  ASSERT_EQ(head.op, OpKind::kLinear);
  EXPECT_EQ(head.weights[0]->name, weight_names::Embedding());
}

}  // namespace graph_builder_tests
}  // namespace kiln
