// embedding: rows of the table by token id, decoded row by row when the
// table is block-quantized.
#include "backend/cpu/binders/binder.h"
#include "backend/cpu/binders/bound_access.h"
#include "backend/cpu/kernels/embedding.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "format/weight_store.h"

namespace kiln::cpu {

namespace {

// Gemma's scaled embeddings: the batch's rows times `scale` (0: unscaled).
void ScaleRows(const RunState& s, const BoundValue& o, float scale) {
  if (scale == 0) return;
  float* rows = Floats(o);
  for (int64_t t = 0; t < s.batch->num_tokens; ++t) {
    for (int64_t c = 0; c < o.cols; ++c) rows[t * o.row_stride + c] *= scale;
  }
}

}  // namespace

Expected<Step> BindEmbedding(const BindContext& ctx, BindCaches&, Step step) {
  const Node& n = *ctx.node;
  const Weight* table = n.weights[0];
  const BoundValue o = ctx.outputs[0];
  const auto scale = static_cast<float>(n.attrs.scale);
  if (IsQuantized(table->dtype)) {
    RowDequantizer decode = QuantRowDequantizer(table->dtype);
    const int64_t vocab = table->shape[0], dim = table->shape[1];
    auto row_bytes = DTypeBytes(table->dtype, static_cast<uint64_t>(dim));
    if (decode == nullptr || !row_bytes || *row_bytes * static_cast<uint64_t>(vocab) != table->nbytes) {
      return Unsupported("{}: embedding table {} of {} [{}, {}] cannot be read by rows", n.name, table->name,
                         DTypeName(table->dtype), vocab, dim);
    }
    const auto bytes_per_row = static_cast<int64_t>(*row_bytes);
    step.run = [=](const RunState& s) {
      // Ids were validated against the vocabulary by Forward.
      (void)EmbeddingWith(ContextOf(s), decode, table->data, bytes_per_row, vocab, dim, s.batch->token_ids,
                          s.batch->num_tokens, Floats(o), o.row_stride);
      ScaleRows(s, o, scale);
    };
    return step;
  }
  step.run = [table, o, scale](const RunState& s) {
    // Ids were validated against the vocabulary by Forward.
    (void)Embedding(ContextOf(s), table->dtype, table->data, table->shape[0], table->shape[1], s.batch->token_ids,
                    s.batch->num_tokens, Floats(o), o.row_stride);
    ScaleRows(s, o, scale);
  };
  return step;
}

}  // namespace kiln::cpu
