// Op names.
#include "graph/op.h"

#include <array>

namespace kiln {
namespace {

constexpr std::array<const char*, kNumOpKinds> kNames = {
    "embedding",      "rms_norm",   "add_rms_norm", "linear",        "rope",        "kv_write",
    "attention",      "silu",       "gelu",         "silu_mul",      "gelu_mul",    "gate_up_silu_mul",
    "add",            "mul",        "softmax",      "select_rows",   "gather_kv",   "attn_scores",
    "masked_softmax", "attn_values", "cast",        "transfer",    "softcap",
    "moe",            "all_reduce_sum", "tensor_op",
};

}  // namespace

const char* OpName(OpKind op) { return kNames[static_cast<size_t>(op)]; }

std::optional<OpKind> OpFromName(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (name == kNames[i]) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

}  // namespace kiln
