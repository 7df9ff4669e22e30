// Payload order: token_ids, positions, token_seq [num_tokens each];
// query_start [num_seqs + 1]; seq_lens [num_seqs]; output_rows
// [num_output_rows]; then each sequence's block table, ceil(seq_len /
// block_size) entries.
#include "parallel/forward_batch_message.h"

#include <limits>

namespace kiln {

void PassMessageHeader::ToInts(int32_t* out) const {
  out[0] = static_cast<int32_t>(kind);
  out[1] = num_tokens;
  out[2] = num_seqs;
  out[3] = num_output_rows;
  out[4] = payload_ints;
  out[5] = shape.max_batch_tokens;
  out[6] = shape.max_seqs;
  out[7] = shape.max_model_len;
  out[8] = shape.block_size;
  out[9] = shape.num_kv_blocks;
}

PassMessageHeader PassMessageHeader::FromInts(const int32_t* in) {
  PassMessageHeader h;
  h.kind = in[0] == static_cast<int32_t>(PassMessageKind::kForward) ? PassMessageKind::kForward
                                                                     : PassMessageKind::kStop;
  h.num_tokens = in[1];
  h.num_seqs = in[2];
  h.num_output_rows = in[3];
  h.payload_ints = in[4];
  h.shape.max_batch_tokens = in[5];
  h.shape.max_seqs = in[6];
  h.shape.max_model_len = in[7];
  h.shape.block_size = in[8];
  h.shape.num_kv_blocks = in[9];
  return h;
}

namespace {

int64_t TableLength(int32_t seq_len, int64_t block_size) { return (seq_len + block_size - 1) / block_size; }

}  // namespace

Expected<PassMessageHeader> EncodeForwardBatch(const ForwardBatch& b, const SessionShape& shape,
                                               std::vector<int32_t>* payload) {
  const int64_t block_size = shape.block_size;
  if (block_size <= 0) return InvalidArgument("forward pass message: block size {}", block_size);
  payload->clear();
  auto append = [&](const int32_t* p, int64_t n) { payload->insert(payload->end(), p, p + n); };
  append(b.token_ids, b.num_tokens);
  append(b.positions, b.num_tokens);
  append(b.token_seq, b.num_tokens);
  append(b.query_start, int64_t{b.num_seqs} + 1);
  append(b.seq_lens, b.num_seqs);
  if (b.num_output_rows > 0) append(b.output_rows, b.num_output_rows);
  for (int32_t s = 0; s < b.num_seqs; ++s) append(b.block_tables[s], TableLength(b.seq_lens[s], block_size));
  if (payload->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return OutOfRange("forward pass message of {} ints", payload->size());
  }
  PassMessageHeader h;
  h.kind = PassMessageKind::kForward;
  h.num_tokens = b.num_tokens;
  h.num_seqs = b.num_seqs;
  h.num_output_rows = b.num_output_rows;
  h.payload_ints = static_cast<int32_t>(payload->size());
  h.shape = shape;
  return h;
}

Status DecodeForwardBatch(const PassMessageHeader& h, std::vector<int32_t> payload, int64_t block_size,
                          DecodedForwardBatch* out) {
  if (h.num_tokens < 0 || h.num_seqs < 0 || h.num_output_rows < 0 || block_size <= 0) {
    return InvalidArgument("forward pass message: {} tokens, {} sequences, {} output rows", h.num_tokens,
                           h.num_seqs, h.num_output_rows);
  }
  const int64_t fixed = 3 * int64_t{h.num_tokens} + 2 * int64_t{h.num_seqs} + 1 + h.num_output_rows;
  if (static_cast<int64_t>(payload.size()) != h.payload_ints || h.payload_ints < fixed) {
    return InvalidArgument("forward pass message: {} ints, the header says {} (at least {})", payload.size(),
                           h.payload_ints, fixed);
  }
  out->ints = std::move(payload);
  const int32_t* p = out->ints.data();
  ForwardBatch& b = out->batch;
  b = ForwardBatch{};
  b.num_tokens = h.num_tokens;
  b.token_ids = p;
  b.positions = p + h.num_tokens;
  b.token_seq = p + 2 * int64_t{h.num_tokens};
  p += 3 * int64_t{h.num_tokens};
  b.num_seqs = h.num_seqs;
  b.query_start = p;
  p += h.num_seqs + 1;
  b.seq_lens = p;
  p += h.num_seqs;
  b.num_output_rows = h.num_output_rows;
  b.output_rows = p;
  p += h.num_output_rows;
  const int32_t* end = out->ints.data() + out->ints.size();
  out->tables.resize(static_cast<size_t>(h.num_seqs));
  for (int32_t s = 0; s < h.num_seqs; ++s) {
    if (b.seq_lens[s] < 0) return InvalidArgument("forward pass message: sequence {} of length {}", s, b.seq_lens[s]);
    out->tables[static_cast<size_t>(s)] = p;
    p += TableLength(b.seq_lens[s], block_size);
    if (p > end) return InvalidArgument("forward pass message: block tables run past its {} ints", h.payload_ints);
  }
  if (p != end) return InvalidArgument("forward pass message: {} ints left over", end - p);
  b.block_tables = out->tables.data();
  return Status::Ok();
}

}  // namespace kiln
