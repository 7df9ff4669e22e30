// Which type each tensor of a model gets when it is quantized to a file type
// such as Q4_K_M: llama.cpp's mixed policy (embeddings, the output matrix and
// some attention/FFN tensors at higher precision; vectors kept as f32) and
// its per-tensor fallback where a block type does not divide a row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace kiln {

// The file types kiln writes, numbered as GGUF's general.file_type.
enum class QuantFileType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ4_K_M = 15,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
};

// "q4_k_m", "bf16", ... (lower case, as --type takes them).
const char* QuantFileTypeName(QuantFileType type);
// Parses a name as QuantFileTypeName prints it, in any case.
std::optional<QuantFileType> ParseQuantFileType(std::string_view name);
// "q8_0, q4_0, ..." for help texts and errors.
std::string QuantFileTypeNames();
// The type most matrices of the file type get (q4_k for q4_k_m).
DType DefaultMatrixType(QuantFileType type);

// What the policy needs to know about one tensor: its GGUF name
// ("blk.3.ffn_down.weight") and row-major shape (the last dimension is the
// row, GGUF's ne[0]).
struct TensorFacts {
  std::string name;
  std::vector<int64_t> shape;
};

// What it needs to know about the model.
struct ModelFacts {
  int64_t num_layers = 0;
  bool has_output = false;  // a separate output.weight (false: tied to token_embd)
};

struct TypeChoice {
  DType dtype = DType::kF32;      // what the tensor is written as
  DType preferred = DType::kF32;  // what the policy chose before any fallback
  bool keep_as_is = false;        // not a matrix to convert (vectors, norms): copied, f32
  // Why `dtype` differs from `preferred` ("128 columns are not a multiple of
  // q4_k's block of 256"), empty when it does not.
  std::string fallback_reason;
};

// The type of one tensor under `type`. Vectors and norm weights are kept
// (keep_as_is, f32). For the float file types every matrix gets that type;
// for the block types llama.cpp's rules apply:
//   - output.weight, or token_embd.weight when there is no output.weight:
//     q6_k (q8_0 stays q8_0), or q8_0 outright when the row is not a
//     multiple of 256;
//   - q4_k_m / q5_k_m: attn_v and ffn_down of the "more bits" layers (the
//     first and last eighth of the layers and every third layer between)
//     get q6_k;
//   - everything else the file type's default type.
// A k-quant that does not divide the row falls back to q5_0 (q4_k), q5_1
// (q5_k) or q8_0 (q6_k), and any block type that still does not fit to f16.
TypeChoice ChooseTensorType(QuantFileType type, const TensorFacts& tensor, const ModelFacts& model);

// llama.cpp's "use more bits" layers: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2.
bool UseMoreBits(int64_t layer, int64_t num_layers);

}  // namespace kiln
