// The operator table: every op the graph IR knows, with the facts the
// compiler needs about it (arity, weights, cost) kept in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class OpKind : uint8_t {
  kEmbedding,     // token ids -> rows of the embedding table
  kRmsNorm,       // y = w * x / rms(x), per row or per head (group)
  kAddRmsNorm,    // fused: s = x + residual; y = rmsnorm(s); outputs (y, s)
  kLinear,        // y = x W^T (+ b); fused QKV is one Linear with several weights
  kRope,          // rotary position embedding, per head
  kKvWrite,       // stores the batch's k and v rows into the paged KV cache
  kAttention,     // causal GQA attention over the paged KV cache
  kSilu,          // y = x * sigmoid(x)
  kGelu,          // y = gelu(x) (erf form, or tanh form by attribute)
  kSiluMul,       // y = silu(gate) * up
  kGeluMul,       // y = gelu(gate) * up
  kGateUpSiluMul, // fused: y = silu(x Wg^T) * (x Wu^T)
  kAdd,           // y = a + b
  kMul,           // y = a * b
  kSoftmax,       // row softmax
  kSelectRows,    // the rows whose logits are wanted (last position of each sequence)
  kGatherKv,      // decomposed attention: copy each sequence's keys and values out of the cache
  kAttnScores,    // decomposed attention: S = scale * Q K^T per sequence and head (a matmul)
  kMaskedSoftmax, // decomposed attention: causal/window mask, then softmax over S
  kAttnValues,    // decomposed attention: O = P V per sequence and head (a matmul)
  kCast,          // dtype conversion inserted by the precision policy
  kTransfer,      // copy between memory domains, inserted by the layout stage
  kSoftcap,       // y = cap * tanh(x / cap) (Gemma 2's logits)
  kMoe,           // mixture of experts: route each row to its top-k experts' SwiGLU MLPs, sum them weighted
  kAllReduceSum,  // tensor parallelism: y = the sum of x over every rank (backend/collective.h)
  kTensorOp,      // an N-dimensional tensor op named by Node::op_type (graph/tensor_op.h)
};

inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kTensorOp) + 1;

const char* OpName(OpKind op);
std::optional<OpKind> OpFromName(std::string_view name);

}  // namespace kiln
