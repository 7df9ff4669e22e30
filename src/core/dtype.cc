// The table of element types.
#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

namespace kiln {
namespace {

constexpr std::array<DTypeInfo, kNumDTypes> kInfos = {{
    {"f32", 1, 4, true, false},
    {"f16", 1, 2, true, false},
    {"bf16", 1, 2, true, false},
    {"f64", 1, 8, true, false},
    {"f8_e4m3", 1, 1, true, false},
    {"f8_e5m2", 1, 1, true, false},
    {"i64", 1, 8, false, false},
    {"i32", 1, 4, false, false},
    {"i16", 1, 2, false, false},
    {"i8", 1, 1, false, false},
    {"u8", 1, 1, false, false},
    {"bool", 1, 1, false, false},
    {"q4_0", 32, 18, false, true},
    {"q4_1", 32, 20, false, true},
    {"q5_0", 32, 22, false, true},
    {"q5_1", 32, 24, false, true},
    {"q8_0", 32, 34, false, true},
    {"q8_1", 32, 36, false, true},
    {"q2_k", 256, 84, false, true},
    {"q3_k", 256, 110, false, true},
    {"q4_k", 256, 144, false, true},
    {"q5_k", 256, 176, false, true},
    {"q6_k", 256, 210, false, true},
    {"q8_k", 256, 292, false, true},
    {"iq4_nl", 32, 18, false, true},
    {"iq4_xs", 256, 136, false, true},
    {"iq2_xxs", 256, 66, false, true},
    {"iq2_xs", 256, 74, false, true},
    {"iq2_s", 256, 82, false, true},
    {"iq3_xxs", 256, 98, false, true},
    {"iq3_s", 256, 110, false, true},
}};

}  // namespace

const DTypeInfo& GetDTypeInfo(DType t) { return kInfos[static_cast<size_t>(t)]; }

std::optional<DType> DTypeFromName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "fp32" || lower == "float32" || lower == "float") return DType::kF32;
  if (lower == "fp16" || lower == "float16" || lower == "half") return DType::kF16;
  if (lower == "bfloat16") return DType::kBF16;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (lower == kInfos[i].name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<uint64_t> DTypeBytes(DType t, uint64_t n) {
  const DTypeInfo& info = GetDTypeInfo(t);
  if (n % static_cast<uint64_t>(info.block_size) != 0) return std::nullopt;
  uint64_t blocks = n / static_cast<uint64_t>(info.block_size);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.block_bytes), &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace kiln
