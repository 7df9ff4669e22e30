// Embedding lookup: rows by id in each table dtype, ids checked, the
// dequantization hook.
#include "backend/cpu/kernels/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/half.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace embedding_tests {

using testing::AllIsas;
using testing::ContextFor;
using testing::RandomFloats;

class EmbeddingTest : public ::testing::TestWithParam<Isa> {};

TEST_P(EmbeddingTest, CopiesRowsByIdInEveryDtype) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  const int64_t vocab = 50, dim = 37, ld_out = 40;
  std::vector<float> table = RandomFloats(static_cast<size_t>(vocab * dim), 1);
  std::vector<uint16_t> bf16 = testing::ToBf16(table), f16 = testing::ToF16(table);
  const std::vector<int32_t> ids = {0, 49, 7, 7, 23};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const void* data = dtype == DType::kF32   ? static_cast<const void*>(table.data())
                       : dtype == DType::kF16 ? static_cast<const void*>(f16.data())
                                              : static_cast<const void*>(bf16.data());
    std::vector<float> out(ids.size() * ld_out, 0.5f);
    ASSERT_TRUE(Embedding(ContextFor(GetParam(), 2), dtype, data, vocab, dim, ids.data(),
                          static_cast<int64_t>(ids.size()), out.data(), ld_out)
                    .ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int64_t c = 0; c < dim; ++c) {
        const size_t src = static_cast<size_t>(ids[i] * dim + c);
        const float want = dtype == DType::kF32   ? table[src]
                           : dtype == DType::kF16 ? F16ToF32(f16[src])
                                                  : Bf16ToF32(bf16[src]);
        ASSERT_EQ(out[i * ld_out + static_cast<size_t>(c)], want) << DTypeName(dtype) << " token " << i;
      }
      EXPECT_EQ(out[i * ld_out + dim], 0.5f);
    }
  }
}

TEST_P(EmbeddingTest, RejectsIdsOutsideTheVocabularyWritingNothing) {
  KILN_SKIP_UNLESS_AVAILABLE(GetParam());
  std::vector<float> table(10 * 4, 1.0f);
  for (int32_t bad : {-1, 10, 1 << 30}) {
    const std::vector<int32_t> ids = {3, bad};
    std::vector<float> out(8, 0.0f);
    Status s =
        Embedding(ContextFor(GetParam(), 1), DType::kF32, table.data(), 10, 4, ids.data(), 2, out.data(), 4);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
    EXPECT_NE(s.message().find("token 1"), std::string::npos) << s.message();
    for (float v : out) EXPECT_EQ(v, 0.0f);
  }
  const int32_t id = 0;
  float out[4];
  EXPECT_EQ(Embedding(ContextFor(GetParam(), 1), DType::kQ4_0, table.data(), 10, 4, &id, 1, out, 4).code(),
            StatusCode::kUnsupported);
}

TEST(Embedding, DequantizeHookDecodesEachRow) {
  // A toy format: one scale byte then `dim` signed bytes.
  const int64_t vocab = 3, dim = 4, row_bytes = 1 + dim;
  std::vector<uint8_t> table = {2, 1, 2, 3, 4, 10, 255, 0, 1, 2, 1, 0, 0, 0, 128};
  auto decode = [](const void* row, float* out, int64_t n) {
    const auto* bytes = static_cast<const uint8_t*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(bytes[0]) * static_cast<int8_t>(bytes[1 + i]);
  };
  const std::vector<int32_t> ids = {1, 0, 2};
  std::vector<float> out(12);
  ASSERT_TRUE(EmbeddingWith(KernelContext{}, decode, table.data(), row_bytes, vocab, dim, ids.data(), 3,
                            out.data(), dim)
                  .ok());
  EXPECT_EQ(out, (std::vector<float>{-10, 0, 10, 20, 2, 4, 6, 8, 0, 0, 0, -128}));
  const int32_t bad = 3;
  EXPECT_FALSE(
      EmbeddingWith(KernelContext{}, decode, table.data(), row_bytes, vocab, dim, &bad, 1, out.data(), dim)
          .ok());
}

INSTANTIATE_TEST_SUITE_P(Isas, EmbeddingTest, ::testing::ValuesIn(AllIsas()), testing::IsaParamName);

}  // namespace embedding_tests
}  // namespace kiln::cpu
