// A forward pass as rank 0 sends it to the other tensor-parallel ranks:
// a fixed header (what follows and how long it is), then the batch's arrays
// as one run of int32s. Block tables travel only as far as each sequence's
// length reaches.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/forward_batch.h"
#include "core/status.h"

namespace kiln {

enum class PassMessageKind : int32_t { kStop = 0, kForward = 1 };

// The shape of rank 0's session, which every rank's matches (the engine
// may make several in turn, as the throughput benchmark does).
struct SessionShape {
  int32_t max_batch_tokens = 0;
  int32_t max_seqs = 0;
  int32_t max_model_len = 0;
  int32_t block_size = 0;
  int32_t num_kv_blocks = 0;

  bool operator==(const SessionShape&) const = default;
};

struct PassMessageHeader {
  static constexpr int kInts = 10;
  PassMessageKind kind = PassMessageKind::kStop;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_output_rows = 0;
  int32_t payload_ints = 0;
  SessionShape shape;

  void ToInts(int32_t* out) const;
  static PassMessageHeader FromInts(const int32_t* in);
};

// The header and payload of `batch` for a session of `shape`.
Expected<PassMessageHeader> EncodeForwardBatch(const ForwardBatch& batch, const SessionShape& shape,
                                               std::vector<int32_t>* payload);

// A received batch: the arrays, and a ForwardBatch pointing into them.
struct DecodedForwardBatch {
  std::vector<int32_t> ints;
  std::vector<const int32_t*> tables;
  ForwardBatch batch;
};

// Reads what EncodeForwardBatch wrote; errors on a payload of the wrong
// length or inconsistent counts.
Status DecodeForwardBatch(const PassMessageHeader& header, std::vector<int32_t> payload, int64_t block_size,
                          DecodedForwardBatch* out);

}  // namespace kiln
