// Moving KV cache blocks from a prefill rank to a decoding rank, as a
// prefill/decode split would: one block alone (its one-way time, from a
// ping-pong of the block) and a prompt's worth of blocks streamed back to
// back (all sends posted at once, the receiver acknowledging the last).
#pragma once

#include <cstdint>

#include <mpi.h>

#include "ping_pong.h"
#include "repeated_timing.h"
#include "transport_options.h"

namespace kiln::transport {

struct KvBlockResult {
  KvShape shape;
  int64_t block_tokens = 0;
  int64_t block_bytes = 0;
  PingPongResult one_block;
  int64_t stream_blocks = 0;
  RepeatedTiming stream;         // seconds per streamed prompt (all its blocks, and the acknowledgement)
  bool stream_verified = false;  // rank 1 received every block intact
};

// Every rank of `comm` calls it; ranks above 1 only take part in the timing.
KvBlockResult MeasureKvBlocks(MPI_Comm comm, const KvShape& shape, const TransportOptions& options);

}  // namespace kiln::transport
