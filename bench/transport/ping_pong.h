// Ping-pong between ranks 0 and 1: rank 0 sends a message, rank 1 sends it
// back. Half the round trip is the one-way time of a message of that size,
// the alpha + bytes / beta the distributed model (docs/distributed.md) is
// fitted to.
#pragma once

#include <cstdint>

#include <mpi.h>

#include "repeated_timing.h"

namespace kiln::transport {

struct PingPongResult {
  int64_t bytes = 0;
  RepeatedTiming one_way;  // seconds per one-way message
  bool verified = false;   // both ranks received the bytes sent, on every rank's word
};

// Every rank of `comm` calls it; ranks above 1 only take part in the timing.
PingPongResult MeasurePingPong(MPI_Comm comm, int64_t bytes, int repeats, double min_seconds);

}  // namespace kiln::transport
