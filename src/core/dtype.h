// Element types kiln stores and computes in, including the GGUF block-quantized
// formats, whose elements come in fixed-size blocks of packed bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kF8E4M3,
  kF8E5M2,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  // GGUF block formats (ggml's layouts, byte for byte).
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ8_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
  // ggml's non-linear 4-bit formats: 4-bit indices into a fixed table of 16
  // values, one scale per 32 (IQ4_NL) or 6-bit sub-scales under one scale
  // per 256 (IQ4_XS).
  kIQ4_NL,
  kIQ4_XS,
  // ggml's 2- and 3-bit i-quants: groups of 8 or 4 values as indices into
  // fixed grids, signs apart, 4-bit scales per 32 (or 16) under one per 256.
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ3_XXS,
  kIQ3_S,
};

inline constexpr int kNumDTypes = static_cast<int>(DType::kIQ3_S) + 1;

struct DTypeInfo {
  const char* name;   // "f32", "bf16", "q4_k", ...
  int block_size;     // elements per block (1 for plain types)
  int block_bytes;    // bytes per block
  bool is_float;      // a plain floating-point type
  bool is_quantized;  // a block-quantized type
};

const DTypeInfo& GetDTypeInfo(DType t);
inline const char* DTypeName(DType t) { return GetDTypeInfo(t).name; }
inline int DTypeBlockSize(DType t) { return GetDTypeInfo(t).block_size; }
inline bool IsQuantized(DType t) { return GetDTypeInfo(t).is_quantized; }

// Parses a name as printed by DTypeName (case-insensitive; "fp32"/"float32",
// "fp16"/"float16", "bfloat16" accepted too).
std::optional<DType> DTypeFromName(std::string_view name);

// Bytes taken by `n` elements; nullopt when n is not a whole number of blocks
// or the size overflows.
std::optional<uint64_t> DTypeBytes(DType t, uint64_t n);

}  // namespace kiln
