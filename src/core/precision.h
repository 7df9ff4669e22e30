// The precision policy of a compiled model: which activations may be
// rounded to bf16. Chosen on the command line, applied by the compiler's
// fuse stage, reported by every layer above it.
//   fp32:  every activation fp32;
//   mixed: a matmul's input takes its weight's dtype (bf16) where the
//          backend multiplies bf16 natively;
//   bf16:  every matmul takes bf16 inputs wherever the backend takes them.
// Norms, softmax, RoPE and accumulations stay fp32 under every policy.
#pragma once

#include <string_view>

#include "core/status.h"

namespace kiln {

enum class Precision { kFp32, kMixed, kBf16 };

// "fp32", "mixed" or "bf16".
const char* PrecisionName(Precision p);
// The inverse of PrecisionName; errors list the accepted names.
Expected<Precision> ParsePrecision(std::string_view name);

}  // namespace kiln
