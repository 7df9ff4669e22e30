// Graphs sharing one activation arena: the arena is the largest graph's
// need, a graph bound before it grew binds again and computes the same, and
// every graph's output equals the one it gives with an arena of its own.
#include "compiler/shared_arenas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compiled_tensor_graph.h"
#include "core/thread_pool.h"
#include "tensor_graph_builder.h"

namespace kiln {
namespace shared_arenas_tests {

using testing::SeededValues;
using testing::TensorNode;

// x -> Relu -> Sigmoid -> Neg -> Sigmoid -> y over [1, channels, side, side]:
// its intermediates live in the arena.
struct ChainGraph {
  Graph g;
  ValueId x, y;
  size_t elems;
};

ChainGraph Chain(int64_t channels, int64_t side) {
  ChainGraph c;
  const TensorType t{DType::kF32, {1, channels, side, side}};
  c.elems = static_cast<size_t>(channels * side * side);
  c.x = c.g.AddTensorValue("x", t);
  c.g.value(c.x).is_graph_input = true;
  c.g.value(c.x).io_slot = 0;
  ValueId v = c.x;
  const char* ops[] = {"Relu", "Sigmoid", "Neg", "Sigmoid"};
  for (int i = 0; i < 4; ++i) {
    const std::string name = std::string(ops[i]) + std::to_string(i);
    const ValueId out = c.g.AddTensorValue(name + "_out", t);
    c.g.AddNode(TensorNode(ops[i], name.c_str(), {v}, out));
    v = out;
  }
  c.y = v;
  c.g.value(c.y).is_output = true;
  c.g.value(c.y).io_slot = 1;
  return c;
}

std::unique_ptr<CompiledTensorGraph> CompileChain(int64_t channels, int64_t side, const TensorCompileOptions& o,
                                                  size_t* elems) {
  ChainGraph c = Chain(channels, side);
  *elems = c.elems;
  auto compiled = CompiledTensorGraph::Compile(std::move(c.g), {c.x}, {c.y}, o);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled.ok() ? std::move(*compiled) : nullptr;
}

std::vector<float> RunOnce(CompiledTensorGraph& graph, size_t elems, int seed) {
  const std::vector<float> in = SeededValues(elems, seed);
  std::vector<float> out(elems);
  ThreadPool pool(2);
  const Status st = graph.Run({in.data()}, {out.data()}, &pool, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

size_t ArenaBytes(const CompiledTensorGraph& g) {
  size_t sum = 0;
  for (const auto& [domain, bytes] : g.report().arena_bytes) sum += bytes;
  return sum;
}

TEST(SharedArenas, TheLargestNeedIsAllocatedAndAGraphBoundBeforeItGrewBindsAgain) {
  auto shared = std::make_shared<SharedArenas>();
  TensorCompileOptions own;
  TensorCompileOptions with_shared;
  with_shared.shared_arenas = shared;

  size_t small_elems = 0, large_elems = 0;
  with_shared.arena_user = "small";
  auto small = CompileChain(8, 4, with_shared, &small_elems);
  ASSERT_NE(small, nullptr);
  const uint64_t first_generation = shared->generation();
  const std::vector<float> small_before = RunOnce(*small, small_elems, 1);

  with_shared.arena_user = "large";
  auto large = CompileChain(32, 16, with_shared, &large_elems);
  ASSERT_NE(large, nullptr);
  ASSERT_GT(ArenaBytes(*large), ArenaBytes(*small));
  EXPECT_NE(shared->generation(), first_generation) << "the larger graph grows the arena";

  // The small graph's first binding points into the freed arena: it binds
  // again, and computes what it did.
  EXPECT_EQ(RunOnce(*small, small_elems, 1), small_before);

  size_t elems = 0;
  auto large_alone = CompileChain(32, 16, own, &elems);
  ASSERT_NE(large_alone, nullptr);
  EXPECT_EQ(RunOnce(*large, large_elems, 2), RunOnce(*large_alone, elems, 2));
  auto small_alone = CompileChain(8, 4, own, &elems);
  ASSERT_NE(small_alone, nullptr);
  EXPECT_EQ(RunOnce(*small_alone, elems, 1), small_before);

  // One arena of the largest need, where separate arenas take the sum.
  EXPECT_EQ(shared->shared_bytes(), std::max(ArenaBytes(*small), ArenaBytes(*large)));
  EXPECT_EQ(shared->separate_bytes(), ArenaBytes(*small) + ArenaBytes(*large));
  EXPECT_EQ(shared->needs().size(), 2u);
  // Runs alternating between the two keep giving the same outputs.
  const uint64_t settled = shared->generation();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(RunOnce(*small, small_elems, 1), small_before);
    EXPECT_EQ(RunOnce(*large, large_elems, 2), RunOnce(*large_alone, large_elems, 2));
  }
  EXPECT_EQ(shared->generation(), settled) << "nothing grows once the largest graph is in";
}

}  // namespace shared_arenas_tests
}  // namespace kiln
