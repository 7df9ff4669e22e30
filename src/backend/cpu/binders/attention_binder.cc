// kv_write and fused paged attention over the KV cache.
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "backend/cpu/kernels/paged_attention.h"

namespace kiln::cpu {

Expected<Step> BindKvWrite(const BindContext& ctx, BindCaches&, Step step) {
  const BoundValue k = ctx.inputs[0], v = ctx.inputs[1];
  const int64_t layer = ctx.node->attrs.layer;
  step.run = [=](const RunState& s) {
    const int32_t* slots = s.kv_cache->layout().InWindowPool(layer) ? s.window_slots : s.slots;
    KvWrite(ContextOf(s), KvView(s, layer), s.batch->num_tokens, slots, Floats(k), k.row_stride, Floats(v),
            v.row_stride);
  };
  return step;
}

Expected<Step> BindAttention(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const BoundValue q = ctx.inputs[0], o = ctx.outputs[0];
  const int64_t layer = n.attrs.layer;
  AttentionParams params;
  params.num_heads = static_cast<int32_t>(n.attrs.n_heads);
  params.scale = static_cast<float>(n.attrs.scale);
  params.window = static_cast<int32_t>(n.attrs.sliding_window);
  params.softcap = static_cast<float>(n.attrs.softcap);
  step.run = [=](const RunState& s) {
    AttentionBatch b;
    b.num_tokens = s.batch->num_tokens;
    b.token_seq = s.batch->token_seq;
    b.token_pos = s.batch->positions;
    b.num_seqs = s.batch->num_seqs;
    b.block_tables =
        s.kv_cache->layout().InWindowPool(layer) ? s.batch->window_block_tables : s.batch->block_tables;
    b.block_table_lens = s.block_table_lens;
    PagedAttention(ContextOf(s), b, KvView(s, layer), params, Floats(q), q.row_stride, Floats(o), o.row_stride);
  };
  return step;
}

}  // namespace kiln::cpu
