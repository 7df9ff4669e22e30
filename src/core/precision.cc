// Precision names.
#include "core/precision.h"

namespace kiln {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kMixed: return "mixed";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

Expected<Precision> ParsePrecision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "mixed") return Precision::kMixed;
  if (name == "bf16") return Precision::kBf16;
  return InvalidArgument("precision '{}': expected fp32, mixed or bf16", name);
}

}  // namespace kiln
