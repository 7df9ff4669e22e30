// Where the KV cache lives: with the kernel that reads it for attention.
// A KV write placed on another backend moves to it, its inputs transferred;
// readers on two memories are an error.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "compiler/layout.h"
#include "compiler/legalize.h"
#include "compiler_test_util.h"
#include "models/decoder_builder.h"

namespace kiln {
namespace kv_placement_tests {

const ShapeEnv kCostEnv{1, 1, 128, 128};

Graph Placed(const WeightStore& store, const std::string& target) {
  auto g = BuildDecoderGraph(store);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  BackendRegistry& r = BackendRegistry::Get();
  LegalizeReport report;
  EXPECT_TRUE(Legalize(*g, *r.Find(target), r.cpu(), kCostEnv, &report).ok());
  return std::move(g).value();
}

TEST(KvCachePlacement, LivesWithAttention) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  for (const char* target : {"cpu", "testaccel", "testaccel-mm"}) {
    Graph g = Placed(*store, target);
    LayoutReport report;
    ASSERT_TRUE(AssignDomainsAndTransfers(g, BackendRegistry::Get(), &report).ok()) << target;
    // Neither stand-in reads the cache (testaccel-mm gathers on the CPU).
    EXPECT_EQ(report.kv_cache_backend, "cpu") << target;
    EXPECT_EQ(report.kv_cache_domain, HostMemory().id()) << target;
  }
}

TEST(KvCachePlacement, AKvWriteElsewhereMovesToTheCacheWithItsInputsTransferred) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  Graph g = Placed(*store, "testaccel");
  // As if a backend had taken the KV write but not attention.
  int moved = 0;
  for (Node& n : g.nodes()) {
    if (n.op == OpKind::kKvWrite) {
      n.backend = "testaccel";
      ++moved;
    }
  }
  ASSERT_EQ(moved, 2);
  LayoutReport report;
  ASSERT_TRUE(AssignDomainsAndTransfers(g, BackendRegistry::Get(), &report).ok());
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::kKvWrite) continue;
    EXPECT_EQ(n.backend, "cpu") << n.name;
    for (ValueId in : n.inputs) {
      if (g.value(in).is_marker()) continue;
      EXPECT_EQ(g.value(in).domain, HostMemory().id()) << n.name;
    }
  }
}

TEST(KvCachePlacement, ReadersOnTwoMemoriesAreRefused) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  Graph g = Placed(*store, "testaccel");
  bool first = true;
  for (Node& n : g.nodes()) {
    if (n.op == OpKind::kAttention) {
      if (!first) n.backend = "testaccel";  // layer 1's attention elsewhere
      first = false;
    }
  }
  LayoutReport report;
  Status s = AssignDomainsAndTransfers(g, BackendRegistry::Get(), &report);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("one memory must hold it"), std::string::npos) << s.message();
}

}  // namespace kv_placement_tests
}  // namespace kiln
