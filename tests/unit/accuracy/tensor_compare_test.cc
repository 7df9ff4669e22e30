// kiln diff's arithmetic: tensor statistics, which values are comparable
// across file layouts, matching by name and shape, and the first value below
// a threshold; and capturing a real forward pass's values.
#include "accuracy/tensor_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/kv_cache.h"
#include "compiler/compiled_model.h"
#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln {
namespace tensor_compare_tests {

TEST(CompareTensors, CosineAndAbsoluteErrors) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  TensorStats s = CompareTensors(a.data(), b.data(), 4);
  EXPECT_NEAR(s.cosine, (1 + 4 + 9 + 20) / (std::sqrt(30.0) * std::sqrt(39.0)), 1e-12);
  EXPECT_EQ(s.max_abs, 1.0);
  EXPECT_EQ(s.mean_abs, 0.25);
  EXPECT_EQ(s.elements, 4);
  EXPECT_EQ(CompareTensors(a.data(), a.data(), 4).cosine, 1.0);
  const std::vector<float> neg = {-1, -2, -3, -4}, zero = {0, 0, 0, 0};
  EXPECT_NEAR(CompareTensors(a.data(), neg.data(), 4).cosine, -1.0, 1e-12);
  EXPECT_EQ(CompareTensors(zero.data(), zero.data(), 4).cosine, 1.0);
  EXPECT_EQ(CompareTensors(zero.data(), a.data(), 4).cosine, 0.0);
  const std::vector<float> nan = {1, 2, NAN, 4};
  TensorStats with_nan = CompareTensors(a.data(), nan.data(), 4);
  EXPECT_TRUE(std::isnan(with_nan.max_abs));
  EXPECT_FALSE(with_nan.cosine >= 0.5);  // NaN never passes a threshold
}

TEST(ValueNames, LayersAndLayoutInvariance) {
  EXPECT_EQ(LayerOfValue("layers.12.attn_out"), 12);
  EXPECT_EQ(LayerOfValue("layers.x.attn_out"), -1);
  EXPECT_EQ(LayerOfValue("embed"), -1);
  EXPECT_TRUE(IsLayoutInvariantValue("layers.0.attn"));
  EXPECT_TRUE(IsLayoutInvariantValue("layers.0.mlp_norm.bf16"));
  EXPECT_TRUE(IsLayoutInvariantValue("logits"));
  EXPECT_FALSE(IsLayoutInvariantValue("layers.0.q_rope"));
  EXPECT_FALSE(IsLayoutInvariantValue("layers.3.k"));
  EXPECT_FALSE(IsLayoutInvariantValue("layers.1.k_norm"));
  EXPECT_FALSE(IsLayoutInvariantValue("model.layers.0.self_attn.{q_proj,k_proj,v_proj}"));
}

CapturedValue Value(const std::string& name, int64_t rows, int64_t cols, float fill) {
  return {name, rows, cols, std::vector<float>(static_cast<size_t>(rows * cols), fill)};
}

TEST(DiffValues, MatchesByNameAndShapeInTheFirstRunsOrder) {
  std::vector<CapturedValue> a = {Value("embed", 2, 4, 1), Value("layers.0.q", 2, 4, 1),
                                  Value("layers.0.attn", 2, 4, 1), Value("layers.1.output", 2, 4, 1),
                                  Value("logits", 2, 8, 1)};
  std::vector<CapturedValue> b = {Value("logits", 2, 8, 1), Value("layers.1.output", 2, 4, 1),
                                  Value("layers.0.attn", 2, 4, 1), Value("layers.0.q", 2, 4, -1),
                                  Value("embed", 2, 5, 1)};
  b[1].data[3] = -1;  // layers.1.output differs in one element
  auto rows = DiffValues(a, b, IsLayoutInvariantValue);
  ASSERT_EQ(rows.size(), 3u);  // embed differs in shape, layers.0.q is not invariant
  EXPECT_EQ(rows[0].name, "layers.0.attn");
  EXPECT_EQ(rows[1].name, "layers.1.output");
  EXPECT_EQ(rows[1].layer, 1);
  EXPECT_EQ(rows[1].stats.max_abs, 2.0);
  EXPECT_EQ(rows[2].name, "logits");
  EXPECT_EQ(FirstBelow(rows, 0.99), 1);
  EXPECT_EQ(FirstBelow(rows, 0.5), -1);
  EXPECT_EQ(DiffValues(a, b).size(), 4u);  // all names: layers.0.q too
}

// A fused residual add computes layer 1's first value before layer 0's
// output; the table still reads layer by layer.
TEST(DiffValues, OrdersLayerByLayer) {
  std::vector<CapturedValue> a = {Value("embed", 1, 4, 1),           Value("layers.0.attn", 1, 4, 1),
                                  Value("layers.1.attn_norm", 1, 4, 1), Value("layers.0.output", 1, 4, 1),
                                  Value("layers.1.output", 1, 4, 1),    Value("final_norm", 1, 4, 1),
                                  Value("logits", 1, 8, 1)};
  auto rows = DiffValues(a, a);
  std::vector<std::string> names;
  for (const DiffRow& r : rows) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "layers.0.attn", "layers.0.output", "layers.1.attn_norm",
                                             "layers.1.output", "final_norm", "logits"}));
}

TEST(ValueCapture, RecordsEveryValueOfAPass) {
  auto weights = WeightStore::Open(testing::ModelDir("tiny-qwen3"));
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  CompileOptions o;
  o.precision = Precision::kBf16;  // bf16 values are widened too
  o.threads = 1;
  o.max_batch_tokens = 8;
  auto model = CompiledModel::Compile(**weights, o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto cache = (*model)->AllocateKvCache(1);
  ASSERT_TRUE(cache.ok());
  std::vector<int32_t> ids = {5, 6, 7}, pos = {0, 1, 2}, seq = {0, 0, 0}, rows = {0, 1, 2};
  const int32_t qs[2] = {0, 3}, len = 3, block0 = 0;
  const int32_t* tables[1] = {&block0};
  ForwardBatch b;
  b.num_tokens = 3;
  b.token_ids = ids.data();
  b.positions = pos.data();
  b.token_seq = seq.data();
  b.num_seqs = 1;
  b.query_start = qs;
  b.seq_lens = &len;
  b.block_tables = tables;
  b.num_output_rows = 3;
  b.output_rows = rows.data();
  const int64_t vocab = (*model)->config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(3 * vocab));
  ValueCapture capture;
  ASSERT_TRUE((*model)->Forward(b, **cache, logits.data(), vocab, &capture.fn()).ok());
  ASSERT_TRUE(capture.status().ok()) << capture.status().ToString();
  bool saw_logits = false, saw_bf16 = false;
  for (const CapturedValue& v : capture.values()) {
    EXPECT_EQ(v.data.size(), static_cast<size_t>(v.rows * v.cols)) << v.name;
    if (v.name == "logits") {
      saw_logits = true;
      EXPECT_EQ(v.rows, 3);
      EXPECT_EQ(v.data, logits);
    }
    if (v.name.size() > 5 && v.name.substr(v.name.size() - 5) == ".bf16") saw_bf16 = true;
  }
  EXPECT_TRUE(saw_logits);
  EXPECT_TRUE(saw_bf16);
  EXPECT_GT(capture.values().size(), 30u);
}

}  // namespace tensor_compare_tests
}  // namespace kiln
