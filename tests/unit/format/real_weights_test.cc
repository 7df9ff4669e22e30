// Real data: llama.cpp's quantized files dequantize close to the weights they
// were quantized from, and its unquantized files hold the safetensors values
// exactly (tiny-llama after undoing the converter's q/k row permutation).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "format/weight_store.h"
#include "testing/test_paths.h"

namespace kiln {
namespace real_weights_tests {

std::unique_ptr<WeightStore> OpenOrDie(const std::string& path) {
  auto store = WeightStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

// ||a - b|| / ||b||.
double RelativeRmsError(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    err += d * d;
    ref += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(err / ref);
}

// The largest relative RMS error each format may show on these weights: about
// 1.3 times what llama.cpp's quantizers leave on them (Q8_0 0.006, Q6_K 0.019,
// Q5_x 0.045, Q4_x 0.09, Q3_K 0.16, Q2_K 0.30), while a wrong bit position,
// nibble or scale gives errors of order 1.
double Tolerance(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16: return 0.0;
    case DType::kQ8_0: return 0.008;
    case DType::kQ6_K: return 0.025;
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ5_K: return 0.06;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K: return 0.12;
    case DType::kQ3_K: return 0.2;
    case DType::kQ2_K: return 0.4;
    default: return -1;
  }
}

// Compares every tensor of `quantized` with the same tensor of `reference`.
void ExpectCloseToReference(const std::string& quantized, const WeightStore& reference,
                            std::map<DType, int>* checked) {
  SCOPED_TRACE(quantized);
  auto store = OpenOrDie(testing::ModelDir("gguf") + "/" + quantized);
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(store->weights().size(), reference.weights().size());
  for (const Weight& w : store->weights()) {
    auto values = store->ReadF32(w.name);
    auto expected = reference.ReadF32(w.name);
    ASSERT_TRUE(values.ok() && expected.ok()) << w.name;
    ASSERT_EQ(values->size(), expected->size()) << w.name;
    double tolerance = Tolerance(w.dtype);
    ASSERT_GE(tolerance, 0) << DTypeName(w.dtype);
    double error = RelativeRmsError(*values, *expected);
    EXPECT_LE(error, tolerance) << w.name << " (" << DTypeName(w.dtype) << ")";
    if (tolerance > 0) {
      // Quantization changes the values, but not beyond recognition.
      EXPECT_GT(error, 0.0) << w.name;
    }
    ++(*checked)[w.dtype];
  }
}

TEST(RealWeights, Qwen3QuantizedFilesDequantizeCloseToTheF16File) {
  auto f16 = OpenOrDie(testing::ModelDir("gguf") + "/tiny-qwen3-F16.gguf");
  ASSERT_NE(f16, nullptr);
  std::map<DType, int> checked;
  for (const char* file :
       {"tiny-qwen3-Q8_0.gguf", "tiny-qwen3-Q6_K.gguf", "tiny-qwen3-Q5_K_M.gguf", "tiny-qwen3-Q4_K_M.gguf",
        "tiny-qwen3-Q4_0.gguf", "tiny-qwen3-Q4_1.gguf", "tiny-qwen3-Q5_0.gguf", "tiny-qwen3-Q5_1.gguf",
        "tiny-qwen3-Q3_K_M.gguf", "tiny-qwen3-Q2_K.gguf"}) {
    ExpectCloseToReference(file, *f16, &checked);
  }
  // Every block format llama.cpp wrote was among them.
  for (DType t : {DType::kQ8_0, DType::kQ6_K, DType::kQ5_K, DType::kQ4_K, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ3_K, DType::kQ2_K}) {
    EXPECT_GT(checked[t], 0) << DTypeName(t);
  }
}

TEST(RealWeights, SmallModelsQuantizedFilesDequantizeCloseToTheF32File) {
  std::map<DType, int> checked;
  for (const char* model : {"tiny-llama", "tiny-qwen2"}) {
    auto f32 = OpenOrDie(testing::ModelDir("gguf") + "/" + model + "-F32.gguf");
    ASSERT_NE(f32, nullptr);
    for (const char* type : {"Q8_0", "Q4_0", "Q5_K_M", "Q4_K_M"}) {
      ExpectCloseToReference(std::string(model) + "-" + type + ".gguf", *f32, &checked);
    }
  }
  EXPECT_GT(checked[DType::kQ5_1], 0);
  EXPECT_GT(checked[DType::kQ5_0], 0);
}

// HF row r = i + j * d/2 of each head is GGUF row 2i + j (gguf/README.md).
std::vector<float> UndoRopePermutation(const std::vector<float>& gguf, int64_t heads, int64_t head_dim,
                                       int64_t row_length) {
  std::vector<float> hf(gguf.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        int64_t hf_row = h * head_dim + i + j * head_dim / 2;
        int64_t gguf_row = h * head_dim + 2 * i + j;
        std::copy_n(gguf.begin() + gguf_row * row_length, row_length, hf.begin() + hf_row * row_length);
      }
    }
  }
  return hf;
}

TEST(RealWeights, LlamaF32GgufEqualsTheSafetensorsExactly) {
  auto gguf = OpenOrDie(testing::ModelDir("gguf") + "/tiny-llama-F32.gguf");
  auto hf = OpenOrDie(testing::ModelDir("tiny-llama"));
  ASSERT_TRUE(gguf && hf);
  const ModelConfig& c = hf->config();
  int permuted = 0;
  for (const Weight& w : hf->weights()) {
    auto expected = hf->ReadF32(w.name);  // bf16 widened exactly
    auto actual = gguf->ReadF32(w.name);
    ASSERT_TRUE(expected.ok() && actual.ok()) << w.name;
    std::vector<float> values = *actual;
    bool is_q = w.name.find("q_proj.weight") != std::string::npos;
    bool is_k = w.name.find("k_proj.weight") != std::string::npos;
    if (is_q || is_k) {
      values = UndoRopePermutation(values, is_q ? c.num_heads : c.num_kv_heads, c.head_dim, c.hidden_size);
      EXPECT_NE(*actual, *expected) << w.name << ": expected the GGUF rows permuted";
      ++permuted;
    }
    EXPECT_EQ(values, *expected) << w.name;
  }
  EXPECT_EQ(permuted, 2 * c.num_layers);
}

TEST(RealWeights, Qwen2F32GgufEqualsTheSafetensorsExactly) {
  auto gguf = OpenOrDie(testing::ModelDir("gguf") + "/tiny-qwen2-F32.gguf");
  auto hf = OpenOrDie(testing::ModelDir("tiny-qwen2"));
  ASSERT_TRUE(gguf && hf);
  for (const Weight& w : hf->weights()) {
    const Weight* g = gguf->Find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, w.nbytes), 0) << w.name;  // both f32: the same bytes
  }
}

}  // namespace real_weights_tests
}  // namespace kiln
