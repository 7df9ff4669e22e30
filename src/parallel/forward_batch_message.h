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

struct PassMessageHeader {
  static constexpr int kInts = 6;
  PassMessageKind kind = PassMessageKind::kStop;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_output_rows = 0;
  int32_t payload_ints = 0;
  int32_t num_kv_blocks = 0;  // rank 0's KV cache, which every rank's matches

  void ToInts(int32_t* out) const;
  static PassMessageHeader FromInts(const int32_t* in);
};

// The header and payload of `batch` over a cache of `block_size`-token blocks.
Expected<PassMessageHeader> EncodeForwardBatch(const ForwardBatch& batch, int64_t block_size, int64_t num_kv_blocks,
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
