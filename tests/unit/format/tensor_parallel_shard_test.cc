// Tensor parallelism's weight split: every rank's rows and columns put back
// together give the whole model, so the sliced matmuls summed equal the
// full one; splits that cannot be made are refused by name.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "format/weight_store.h"

namespace kiln {
namespace tensor_parallel_shard_tests {

ModelConfig Config(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t hidden, int64_t intermediate) {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.hf_architecture = "LlamaForCausalLM";
  c.vocab_size = 64;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.max_position_embeddings = 128;
  return c;
}

std::vector<float> Read(const WeightStore& s, const std::string& name) {
  auto v = s.ReadF32(name);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::vector<float>{};
}

// y = W x for a row-major [rows, cols] W.
std::vector<double> MatVec(const std::vector<float>& w, int64_t rows, int64_t cols, const float* x) {
  std::vector<double> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r] += double{w[r * cols + c]} * x[c];
  }
  return y;
}

void CheckSplit(DType dtype, const ModelConfig& config, int size) {
  auto full = WeightStore::Dummy(config, dtype, 7);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  std::shared_ptr<const WeightStore> source = std::move(full).value();
  std::vector<std::unique_ptr<WeightStore>> shards;
  for (int r = 0; r < size; ++r) {
    auto shard = WeightStore::TensorParallelShard(source, r, size);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    shards.push_back(std::move(shard).value());
  }
  const ModelConfig& sc = shards[0]->config();
  EXPECT_EQ(sc.num_heads, config.num_heads / size);
  EXPECT_EQ(sc.num_kv_heads, config.num_kv_heads / size);
  EXPECT_EQ(sc.intermediate_size, config.intermediate_size / size);
  EXPECT_EQ(sc.tensor_parallel_size, size);

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    // Column-parallel: the ranks' rows, one after another, are the whole.
    for (const char* proj : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                             "mlp.gate_proj.weight", "mlp.up_proj.weight"}) {
      const std::string name = weight_names::Layer(l, proj);
      std::vector<float> joined;
      for (const auto& s : shards) {
        std::vector<float> part = Read(*s, name);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, Read(*source, name)) << name;
    }
    // Row-parallel: each rank multiplies its columns by its slice of the
    // input; the partial products sum to the full product.
    for (const char* proj : {"self_attn.o_proj.weight", "mlp.down_proj.weight"}) {
      const std::string name = weight_names::Layer(l, proj);
      const Weight* w = source->Find(name);
      ASSERT_NE(w, nullptr);
      const int64_t rows = w->shape[0], cols = w->shape[1], share = cols / size;
      std::vector<float> x(static_cast<size_t>(cols));
      for (float& v : x) v = u(rng);
      std::vector<double> expected = MatVec(Read(*source, name), rows, cols, x.data());
      std::vector<double> sum(static_cast<size_t>(rows));
      for (int r = 0; r < size; ++r) {
        const Weight* part = shards[static_cast<size_t>(r)]->Find(name);
        ASSERT_NE(part, nullptr);
        EXPECT_EQ(part->shape, (std::vector<int64_t>{rows, share}));
        std::vector<double> y = MatVec(Read(*shards[static_cast<size_t>(r)], name), rows, share, x.data() + r * share);
        for (int64_t i = 0; i < rows; ++i) sum[i] += y[i];
      }
      for (int64_t i = 0; i < rows; ++i) EXPECT_NEAR(sum[i], expected[i], 1e-9 * (1 + std::abs(expected[i]))) << name;
    }
  }
  // Replicated: the same memory on every rank.
  for (const auto& s : shards) {
    EXPECT_EQ(s->Find(weight_names::Embedding())->data, source->Find(weight_names::Embedding())->data);
  }
}

TEST(TensorParallelShard, F32SlicesSumToTheFullModel) { CheckSplit(DType::kF32, Config(4, 2, 8, 32, 64), 2); }

TEST(TensorParallelShard, Q8_0SlicesKeepWholeBlocks) { CheckSplit(DType::kQ8_0, Config(4, 2, 32, 64, 128), 2); }

TEST(TensorParallelShard, Q4_0SplitFourWays) { CheckSplit(DType::kQ4_0, Config(8, 4, 32, 64, 256), 4); }

TEST(TensorParallelShard, RefusesHeadsThatDoNotDivide) {
  auto full = WeightStore::Dummy(Config(4, 2, 8, 32, 64), DType::kF32, 1);
  ASSERT_TRUE(full.ok());
  auto shard = WeightStore::TensorParallelShard(std::move(full).value(), 0, 4);
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("tensor parallel size 4 must divide the attention heads (4) and the "
                                          "key/value heads (2)"),
            std::string::npos)
      << shard.status().ToString();
}

TEST(TensorParallelShard, RefusesAColumnSliceThatCutsABlock) {
  // o_proj's 32 input columns in halves of 16: not whole 32-element blocks.
  auto full = WeightStore::Dummy(Config(4, 2, 8, 32, 64), DType::kQ8_0, 1);
  ASSERT_TRUE(full.ok());
  auto shard = WeightStore::TensorParallelShard(std::move(full).value(), 1, 2);
  ASSERT_FALSE(shard.ok());
  const std::string m = shard.status().message();
  EXPECT_NE(m.find("tensor model.layers.0.self_attn.o_proj.weight of shape [32, 32] (q8_0)"), std::string::npos) << m;
  EXPECT_NE(m.find("split over 2 ranks give 16 each"), std::string::npos) << m;
}

TEST(TensorParallelShard, RefusesABadRank) {
  auto full = WeightStore::Dummy(Config(4, 2, 8, 32, 64), DType::kF32, 1);
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(WeightStore::TensorParallelShard(std::move(full).value(), 2, 2).ok());
}

}  // namespace tensor_parallel_shard_tests
}  // namespace kiln
