// The per-tensor type policy of the mixed file types.
#include "quantize/quant_policy.h"

#include <cctype>

#include <fmt/format.h>

#include "quant/ggml_blocks.h"

namespace kiln {
namespace {

struct FileTypeEntry {
  QuantFileType type;
  const char* name;
  DType matrix_type;
};

constexpr FileTypeEntry kFileTypes[] = {
    {QuantFileType::kQ8_0, "q8_0", DType::kQ8_0},     {QuantFileType::kQ4_0, "q4_0", DType::kQ4_0},
    {QuantFileType::kQ4_1, "q4_1", DType::kQ4_1},     {QuantFileType::kQ5_0, "q5_0", DType::kQ5_0},
    {QuantFileType::kQ5_1, "q5_1", DType::kQ5_1},     {QuantFileType::kQ4_K_M, "q4_k_m", DType::kQ4_K},
    {QuantFileType::kQ5_K_M, "q5_k_m", DType::kQ5_K}, {QuantFileType::kQ6_K, "q6_k", DType::kQ6_K},
    {QuantFileType::kIQ4_NL, "iq4_nl", DType::kIQ4_NL}, {QuantFileType::kIQ4_XS, "iq4_xs", DType::kIQ4_XS},
    {QuantFileType::kBF16, "bf16", DType::kBF16},     {QuantFileType::kF16, "f16", DType::kF16},
    {QuantFileType::kF32, "f32", DType::kF32},
};

const FileTypeEntry& EntryOf(QuantFileType type) {
  for (const FileTypeEntry& e : kFileTypes) {
    if (e.type == type) return e;
  }
  return kFileTypes[0];  // unreachable for valid enumerators
}

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The layer number of "blk.<n>.<...>", or -1.
int64_t LayerOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int64_t layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    layer = layer * 10 + (name[i] - '0');
    if (layer > (int64_t{1} << 40)) return -1;
  }
  return i < name.size() && name[i] == '.' ? layer : -1;
}

// Tensors llama.cpp never quantizes although they are matrices.
bool NeverQuantized(std::string_view name) {
  return EndsWith(name, "_norm.weight") || Contains(name, "ffn_gate_inp.weight") ||
         Contains(name, "position_embd") || Contains(name, "token_types");
}

bool HasSuperBlocks(DType d) {
  return d == DType::kQ2_K || d == DType::kQ3_K || d == DType::kQ4_K || d == DType::kQ5_K || d == DType::kQ6_K ||
         d == DType::kIQ4_XS;
}

// The type of 32-value blocks a super-block type falls back to for rows
// that are not whole super-blocks (llama.cpp's choice).
DType SuperBlockFallback(DType d) {
  switch (d) {
    case DType::kQ4_K: return DType::kQ5_0;
    case DType::kQ5_K: return DType::kQ5_1;
    case DType::kIQ4_XS: return DType::kIQ4_NL;
    default: return DType::kQ8_0;
  }
}

// The policy's choice before any fallback.
DType PreferredType(QuantFileType type, std::string_view name, int64_t row, const ModelFacts& model) {
  const DType base = EntryOf(type).matrix_type;
  if (!IsQuantized(base)) return base;
  const bool is_output = name == "output.weight" || (!model.has_output && name == "token_embd.weight");
  if (is_output) {
    if (row % kQK_K != 0) return DType::kQ8_0;
    return base == DType::kQ8_0 ? DType::kQ8_0 : DType::kQ6_K;
  }
  const bool mixed = type == QuantFileType::kQ4_K_M || type == QuantFileType::kQ5_K_M;
  if (mixed && (Contains(name, "attn_v.weight") || Contains(name, "ffn_down"))) {
    int64_t layer = LayerOf(name);
    if (layer >= 0 && UseMoreBits(layer, model.num_layers)) return DType::kQ6_K;
  }
  return base;
}

}  // namespace

const char* QuantFileTypeName(QuantFileType type) { return EntryOf(type).name; }

std::optional<QuantFileType> ParseQuantFileType(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const FileTypeEntry& e : kFileTypes) {
    if (lower == e.name) return e.type;
  }
  return std::nullopt;
}

std::string QuantFileTypeNames() {
  std::string names;
  for (const FileTypeEntry& e : kFileTypes) names += fmt::format("{}{}", names.empty() ? "" : ", ", e.name);
  return names;
}

DType DefaultMatrixType(QuantFileType type) { return EntryOf(type).matrix_type; }

bool UseMoreBits(int64_t layer, int64_t num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

TypeChoice ChooseTensorType(QuantFileType type, const TensorFacts& tensor, const ModelFacts& model) {
  TypeChoice choice;
  if (tensor.shape.size() < 2 || NeverQuantized(tensor.name)) {
    choice.keep_as_is = true;
    return choice;
  }
  const int64_t row = tensor.shape.back();
  choice.preferred = PreferredType(type, tensor.name, row, model);
  choice.dtype = choice.preferred;
  const int block = DTypeBlockSize(choice.dtype);
  if (row % block == 0) return choice;

  if (HasSuperBlocks(choice.dtype)) choice.dtype = SuperBlockFallback(choice.dtype);
  if (row % DTypeBlockSize(choice.dtype) != 0) choice.dtype = DType::kF16;
  choice.fallback_reason =
      fmt::format("{} columns are not a multiple of {}'s block of {}", row, DTypeName(choice.preferred), block);
  return choice;
}

}  // namespace kiln
