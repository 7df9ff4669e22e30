// Attention decomposed for a backend without fused attention: gather_kv
// copies each sequence's keys and values out of the cache, attn_scores
// multiplies S = Q K^T, masked_softmax masks and normalizes S, attn_values
// multiplies O = P V; each per sequence, over all heads at once.
// Scores of sequence i, head h: [t_i x c_i] at score_offsets[i] * heads +
// h * t_i * c_i (t_i its query tokens, c_i its context length).
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/attention_mask.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/softcap.h"
#include "backend/cpu/kernels/softmax.h"

namespace kiln::cpu {

Expected<Step> BindGatherKv(const BindContext& ctx, BindCaches&, Step step) {
  const BoundValue k = ctx.outputs[0], v = ctx.outputs[1];
  const int64_t layer = ctx.node->attrs.layer;
  step.run = [=](const RunState& s) {
    const int32_t* const* tables =
        s.kv_cache->layout().InWindowPool(layer) ? s.batch->window_block_tables : s.batch->block_tables;
    for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
      const int64_t off = s.context_offsets[i];
      GatherKv(ContextOf(s), KvView(s, layer), tables[i], s.batch->seq_lens[i],
               Floats(k) + off * k.row_stride, k.row_stride, Floats(v) + off * v.row_stride, v.row_stride);
    }
  };
  return step;
}

Expected<Step> BindAttnScores(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue q = ctx.inputs[0], k = ctx.inputs[1], sc = ctx.outputs[0];
  // K is shared by each group of query heads.
  const int64_t heads = n.attrs.n_heads, group = n.attrs.n_heads / n.attrs.n_kv_heads, d = n.attrs.head_dim;
  step.run = [=](const RunState& s) {
    for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
      const int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
      ConstMatrixBatch a{Floats(q) + t0 * q.row_stride, q.row_stride, d};
      ConstMatrixBatch b{Floats(k) + s.context_offsets[i] * k.row_stride, k.row_stride, d};
      MatrixBatch c{Floats(sc) + s.score_offsets[i] * heads, cs, ts * cs};
      MatMul(ContextOf(s), heads, ts, cs, d, a, b, /*transpose_b=*/true, c, group);
    }
  };
  return step;
}

Expected<Step> BindMaskedSoftmax(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue x = ctx.inputs[0], o = ctx.outputs[0];
  const int64_t heads = n.attrs.n_heads, window = n.attrs.sliding_window;
  const auto scale = static_cast<float>(n.attrs.scale);
  const auto softcap = static_cast<float>(n.attrs.softcap);
  // Scratch (CpuBackend::ScratchBytes): each score row's visible key range.
  auto* ranges = reinterpret_cast<int32_t*>(ctx.scratch);
  const int64_t cap = ctx.capacity.tokens * heads;
  step.run = [=](const RunState& s) {
    int32_t* begin = ranges;
    int32_t* end = ranges + cap;
    for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
      const int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
      CausalKeyRanges(heads, ts, s.batch->positions + t0, window, begin, end);
      const float* base_in = Floats(x) + s.score_offsets[i] * heads;
      float* base_out = Floats(o) + s.score_offsets[i] * heads;
      if (softcap > 0) {
        // cap * tanh(scale * s / cap) in place of the scaled scores, then
        // their softmax.
        SoftCap(ContextOf(s), heads * ts, cs, base_in, cs, scale, softcap, base_out, cs);
        MaskedSoftmax(ContextOf(s), heads * ts, cs, base_out, cs, 1.0f, begin, end, base_out, cs);
      } else {
        MaskedSoftmax(ContextOf(s), heads * ts, cs, base_in, cs, scale, begin, end, base_out, cs);
      }
    }
  };
  return step;
}

Expected<Step> BindAttnValues(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue p = ctx.inputs[0], v = ctx.inputs[1], o = ctx.outputs[0];
  const int64_t heads = n.attrs.n_heads, group = n.attrs.n_heads / n.attrs.n_kv_heads, d = n.attrs.head_dim;
  step.run = [=](const RunState& s) {
    for (int32_t i = 0; i < s.batch->num_seqs; ++i) {
      const int64_t t0 = s.batch->query_start[i], ts = s.batch->query_start[i + 1] - t0, cs = s.batch->seq_lens[i];
      ConstMatrixBatch a{Floats(p) + s.score_offsets[i] * heads, cs, ts * cs};
      ConstMatrixBatch b{Floats(v) + s.context_offsets[i] * v.row_stride, v.row_stride, d};
      MatrixBatch c{Floats(o) + t0 * o.row_stride, o.row_stride, d};
      MatMul(ContextOf(s), heads, ts, d, cs, a, b, /*transpose_b=*/false, c, group);
    }
  };
  return step;
}

}  // namespace kiln::cpu
