// Registered rewrites. The attention decomposition turns one fused paged
// attention into the three steps any matmul engine can run:
//   K, V = gather(cache)            (each sequence's context, contiguous)
//   S    = scale * Q K^T            (per sequence and head)
//   P    = softmax(mask(S))         (causal by position, sliding window)
//   O    = P V
#include <fmt/format.h>

#include "compiler/legalize.h"

namespace kiln {
namespace {

bool DecomposeAttention(Graph& g, const Node& attn, std::vector<Node>* out) {
  const NodeAttrs& a = attn.attrs;
  ValueId q = attn.inputs[0];
  ValueId written = attn.inputs[1];
  std::string prefix = attn.name + ".";
  int64_t kv_cols = a.n_kv_heads * a.head_dim;

  ValueId k_ctx = g.AddValue(prefix + "k_ctx", DType::kF32, RowSpace::kContextRows, kv_cols);
  ValueId v_ctx = g.AddValue(prefix + "v_ctx", DType::kF32, RowSpace::kContextRows, kv_cols);
  ValueId scores = g.AddValue(prefix + "scores", DType::kF32, RowSpace::kScoreRows, a.n_heads);
  ValueId probs = g.AddValue(prefix + "probs", DType::kF32, RowSpace::kScoreRows, a.n_heads);

  Node gather;
  gather.op = OpKind::kGatherKv;
  gather.name = prefix + "gather_kv";
  gather.inputs = {written};
  gather.outputs = {k_ctx, v_ctx};
  gather.attrs = a;
  gather.named_attrs = attn.named_attrs;

  Node s;
  s.op = OpKind::kAttnScores;
  s.name = prefix + "scores";
  s.inputs = {q, k_ctx};
  s.outputs = {scores};
  s.attrs = a;
  s.named_attrs = attn.named_attrs;

  Node p;
  p.op = OpKind::kMaskedSoftmax;
  p.name = prefix + "softmax";
  p.inputs = {scores};
  p.outputs = {probs};
  p.attrs = a;
  p.named_attrs = attn.named_attrs;

  Node o;
  o.op = OpKind::kAttnValues;
  o.name = prefix + "values";
  o.inputs = {probs, v_ctx};
  o.outputs = attn.outputs;
  o.attrs = a;
  o.named_attrs = attn.named_attrs;

  out->push_back(std::move(gather));
  out->push_back(std::move(s));
  out->push_back(std::move(p));
  out->push_back(std::move(o));
  return true;
}

}  // namespace

const std::vector<Rewrite>& RegisteredRewrites() {
  static const std::vector<Rewrite> rewrites = {
      {"gather_kv + attn_scores + masked_softmax + attn_values", OpKind::kAttention, &DecomposeAttention},
  };
  return rewrites;
}

}  // namespace kiln
