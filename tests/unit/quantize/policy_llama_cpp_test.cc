// The mixed quantization policy against the tensor types llama-quantize
// chose for the tiny models (goldens.json), including its per-tensor
// fallback for the 128-wide rows of tiny-llama and tiny-qwen2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "format/gguf.h"
#include "quantize/quant_policy.h"
#include "testing/test_paths.h"

namespace kiln {
namespace policy_llama_cpp_tests {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

nlohmann::json Goldens() {
  auto text = ReadFileToString(testing::SharedDir() + "/models/gguf/goldens.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// The unquantized file each quantized file was made from.
std::string BaseFile(const std::string& file) {
  if (file.rfind("tiny-qwen3", 0) == 0) return "tiny-qwen3-F16.gguf";
  return file.substr(0, file.find('-', 5)) + "-F32.gguf";
}

TEST(PolicyLlamaCpp, ReproducesEveryTensorTypeOfTheGoldens) {
  nlohmann::json goldens = Goldens();
  int files_checked = 0, fallbacks = 0;
  for (const auto& [file, info] : goldens["files"].items()) {
    auto type = static_cast<QuantFileType>(info["general_file_type"].get<uint32_t>());
    bool known = false;
    for (const char* name : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k", "f16", "f32"}) {
      known |= ParseQuantFileType(name) == type;
    }
    if (!known) continue;
    auto base = GgufFile::Open(testing::SharedDir() + "/models/gguf/" + BaseFile(file));
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    ModelFacts model;
    model.num_layers = *(*base)->GetInt((*base)->GetString("general.architecture").value() + ".block_count");
    model.has_output = (*base)->FindTensor("output.weight") != nullptr;
    for (const auto& [name, golden_type] : info["tensor_types"].items()) {
      const GgufTensorInfo* t = (*base)->FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      TypeChoice c = ChooseTensorType(type, {name, t->shape()}, model);
      std::string expected = golden_type.get<std::string>();
      if (c.keep_as_is) {
        // Kept tensors stay as they are in the base file.
        EXPECT_EQ(expected, GgmlTypeName(t->ggml_type)) << file << " " << name;
        continue;
      }
      EXPECT_EQ(Upper(DTypeName(c.dtype)), expected) << file << " " << name;
      // The only fallbacks are k-quants on the 128-wide rows.
      bool k_quant = c.preferred == DType::kQ4_K || c.preferred == DType::kQ5_K || c.preferred == DType::kQ6_K;
      EXPECT_EQ(!c.fallback_reason.empty(), k_quant && t->dims[0] % 256 != 0) << file << " " << name;
      fallbacks += !c.fallback_reason.empty();
    }
    ++files_checked;
  }
  // 3 Q8_0, 3 Q4_0, 3 Q6_K, 3 Q5_K_M, 3 Q4_K_M, Q4_1/Q5_0/Q5_1 of tiny-qwen3,
  // and the unquantized F32 files.
  EXPECT_EQ(files_checked, 3 * 5 + 3 + 3);
  // Every k-quant matrix of tiny-llama's and tiny-qwen2's Q6_K, Q5_K_M and
  // Q4_K_M files falls back but the output matrix, which is q8_0 outright:
  // 30 - 1 matrices for tiny-llama, 29 - 1 for tied tiny-qwen2.
  EXPECT_EQ(fallbacks, 3 * 29 + 3 * 28);
}

TEST(PolicyLlamaCpp, MoreBitsLayers) {
  // 4 layers: 2 and 3. 32 layers: 0-3, 28-31 and every third from 6.
  std::vector<int64_t> four, thirty_two;
  for (int64_t i = 0; i < 4; ++i) if (UseMoreBits(i, 4)) four.push_back(i);
  for (int64_t i = 0; i < 32; ++i) if (UseMoreBits(i, 32)) thirty_two.push_back(i);
  EXPECT_EQ(four, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(thirty_two, (std::vector<int64_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
}

TEST(PolicyLlamaCpp, FallsBackToF16WhenNoBlockFits) {
  ModelFacts model{4, true};
  TypeChoice c = ChooseTensorType(QuantFileType::kQ4_K_M, {"blk.0.attn_q.weight", {64, 100}}, model);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_EQ(c.preferred, DType::kQ4_K);
  EXPECT_NE(c.fallback_reason.find("100 columns"), std::string::npos) << c.fallback_reason;
  c = ChooseTensorType(QuantFileType::kQ8_0, {"blk.0.attn_q.weight", {64, 48}}, model);
  EXPECT_EQ(c.dtype, DType::kF16);
  c = ChooseTensorType(QuantFileType::kBF16, {"blk.0.attn_q.weight", {64, 48}}, model);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_TRUE(c.fallback_reason.empty());
  EXPECT_TRUE(ChooseTensorType(QuantFileType::kQ4_0, {"blk.0.attn_norm.weight", {64}}, model).keep_as_is);
}

TEST(PolicyLlamaCpp, FileTypeNames) {
  EXPECT_EQ(ParseQuantFileType("Q4_K_M"), QuantFileType::kQ4_K_M);
  EXPECT_EQ(ParseQuantFileType("bf16"), QuantFileType::kBF16);
  EXPECT_FALSE(ParseQuantFileType("q3_k_m"));
  EXPECT_EQ(static_cast<uint32_t>(QuantFileType::kQ5_K_M), 17u);
  EXPECT_EQ(DefaultMatrixType(QuantFileType::kQ5_K_M), DType::kQ5_K);
}

}  // namespace policy_llama_cpp_tests
}  // namespace kiln
