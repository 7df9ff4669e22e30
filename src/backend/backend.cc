// The backend interface's shared parts.
#include "backend/backend.h"

namespace kiln {

BoundValue ShapeOf(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  BoundValue b;
  b.cols = v.cols;
  b.dtype = v.dtype;
  b.rows = v.rows;
  b.is_output = v.is_output;
  b.row_stride = g.RowStride(id);
  return b;
}

int64_t RunState::RowsIn(RowSpace r) const {
  switch (r) {
    case RowSpace::kTokens: return batch->num_tokens;
    case RowSpace::kOutputRows: return batch->num_output_rows;
    case RowSpace::kContextRows: return context_rows;
    case RowSpace::kScoreRows: return score_rows;
    case RowSpace::kNone: return 0;
    case RowSpace::kFixed: return 1;
  }
  return 0;
}

void Backend::EnqueueCopy(CopyDirection direction, const RowCopy& c) {
  MemoryDomain* domain = &this->domain();
  stream().Enqueue([domain, direction, c] {
    switch (direction) {
      case CopyDirection::kHostToDevice:
        domain->CopyFromHost(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
        break;
      case CopyDirection::kDeviceToHost:
        domain->CopyToHost(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
        break;
      case CopyDirection::kWithinDevice:
        domain->CopyWithin(c.dst, c.dst_pitch, c.src, c.src_pitch, c.row_bytes, c.rows);
        break;
    }
  });
}

}  // namespace kiln
