// MPI_Allreduce (sum) of fp32 vectors of hidden x rows values: what tensor
// parallelism reduces twice per layer (after the attention output and the
// MLP down projections), for a decoding step (few rows) up to a prefill
// chunk (hundreds).
#pragma once

#include <cstdint>

#include <mpi.h>

#include "repeated_timing.h"

namespace kiln::transport {

struct AllreduceResult {
  int64_t hidden = 0;
  int64_t rows = 0;
  int ranks = 0;
  RepeatedTiming timing;  // seconds per all-reduce
  // Rank r contributes (r + 1) x ((i mod 251) + 1) / 4 at element i, so the
  // sum is exact in fp32 and known: ((i mod 251) + 1) / 4 x N(N+1)/2.
  bool verified = false;   // every element on every rank is that sum
  double result_sum = 0;   // rank 0's reduced vector summed (in double)
  float result_first = 0;  // and its first element

  int64_t floats() const { return hidden * rows; }
  int64_t bytes() const { return floats() * 4; }
};

// The value rank `rank` contributes at element i.
inline float AllreduceInput(int rank, int64_t i) {
  return static_cast<float>(rank + 1) * static_cast<float>(i % 251 + 1) * 0.25f;
}

AllreduceResult MeasureAllreduce(MPI_Comm comm, int64_t hidden, int64_t rows, int repeats,
                                 double min_seconds);

}  // namespace kiln::transport
