// An independent check of the reference quantizers: re-quantizing the
// unquantized GGUF files' tensors gives, block for block and byte for byte,
// what llama.cpp's llama-quantize wrote into the quantized files, for every
// block format kiln writes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "quant/dequantize.h"
#include "quant/quantize_ref.h"
#include "testing/test_paths.h"

namespace kiln {
namespace quantize_llama_cpp_tests {

struct BlockAgreement {
  int64_t blocks = 0;
  int64_t equal = 0;
  int64_t tensors = 0;
};

std::string GgufDir() { return testing::SharedDir() + "/models/gguf/"; }

// Quantizes every tensor of `file` whose type kiln writes from `source`'s
// values (widened to f32 exactly, as llama-quantize does) and compares.
std::map<DType, BlockAgreement> CompareWithLlamaCpp(const std::string& source_file, const std::string& file) {
  std::map<DType, BlockAgreement> result;
  auto source = GgufFile::Open(GgufDir() + source_file);
  auto target = GgufFile::Open(GgufDir() + file);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE(target.ok()) << target.status().ToString();
  if (!source.ok() || !target.ok()) return result;
  for (const GgufTensorInfo& t : (*target)->tensors()) {
    if (!IsQuantized(t.dtype) || !CanQuantizeTo(t.dtype)) continue;
    const GgufTensorInfo* s = (*source)->FindTensor(t.name);
    EXPECT_NE(s, nullptr) << t.name;
    if (s == nullptr) continue;
    std::vector<float> values(static_cast<size_t>(s->num_elements()));
    EXPECT_TRUE(DequantizeRow(s->dtype, s->data, values.data(), s->num_elements()).ok());
    std::vector<uint8_t> mine(t.nbytes);
    const int64_t row = t.dims[0];
    const uint64_t row_bytes = *DTypeBytes(t.dtype, static_cast<uint64_t>(row));
    for (int64_t r = 0; r < s->num_elements() / row; ++r) {
      EXPECT_TRUE(QuantizeRowRef(t.dtype, values.data() + r * row, mine.data() + r * row_bytes, row).ok());
    }
    const auto block_bytes = static_cast<uint64_t>(GetDTypeInfo(t.dtype).block_bytes);
    BlockAgreement& a = result[t.dtype];
    ++a.tensors;
    for (uint64_t off = 0; off < t.nbytes; off += block_bytes) {
      ++a.blocks;
      a.equal += std::memcmp(mine.data() + off, t.data + off, block_bytes) == 0;
    }
  }
  return result;
}

struct FilePair {
  const char* source;
  const char* quantized;
  std::vector<DType> expected_types;  // the block types the file must contain
};

class QuantizeLlamaCpp : public ::testing::TestWithParam<FilePair> {};

TEST_P(QuantizeLlamaCpp, EveryBlockIsByteIdentical) {
  const FilePair& p = GetParam();
  auto agreement = CompareWithLlamaCpp(p.source, p.quantized);
  for (DType expected : p.expected_types) {
    EXPECT_TRUE(agreement.count(expected)) << p.quantized << " has no " << DTypeName(expected) << " tensor";
  }
  for (const auto& [dtype, a] : agreement) {
    EXPECT_GT(a.blocks, 0);
    EXPECT_EQ(a.equal, a.blocks) << p.quantized << " " << DTypeName(dtype) << ": " << a.equal << " of " << a.blocks
                                 << " blocks in " << a.tensors << " tensors equal";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, QuantizeLlamaCpp,
    ::testing::Values(FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q8_0.gguf", {DType::kQ8_0}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q4_0.gguf", {DType::kQ4_0, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q4_1.gguf", {DType::kQ4_1, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q5_0.gguf", {DType::kQ5_0, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q5_1.gguf", {DType::kQ5_1, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q6_K.gguf", {DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q5_K_M.gguf", {DType::kQ5_K, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q4_K_M.gguf", {DType::kQ4_K, DType::kQ6_K}},
                      FilePair{"tiny-qwen3-F16.gguf", "tiny-qwen3-Q3_K_M.gguf", {DType::kQ4_K, DType::kQ5_K}},
                      FilePair{"tiny-llama-F32.gguf", "tiny-llama-Q4_K_M.gguf", {DType::kQ5_0, DType::kQ8_0}},
                      FilePair{"tiny-llama-F32.gguf", "tiny-llama-Q5_K_M.gguf", {DType::kQ5_1, DType::kQ8_0}},
                      FilePair{"tiny-llama-F32.gguf", "tiny-llama-Q4_0.gguf", {DType::kQ4_0, DType::kQ8_0}},
                      FilePair{"tiny-qwen2-F32.gguf", "tiny-qwen2-Q4_K_M.gguf", {DType::kQ5_0, DType::kQ8_0}},
                      FilePair{"tiny-qwen2-F32.gguf", "tiny-qwen2-Q6_K.gguf", {DType::kQ8_0}}));

}  // namespace quantize_llama_cpp_tests
}  // namespace kiln
