// The collectives a model split across processes needs inside a forward
// pass (tensor parallelism's all-reduce), declared here so that the graph's
// all_reduce_sum op can be bound without knowing the transport; the MPI
// implementation lives in src/parallel and reaches a session through its
// options.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace kiln {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `n` floats elementwise over every rank, in place; every rank calls
  // it with the same n, in the same order. An error (a peer that never
  // answers within the time-out) leaves `data` undefined and the group
  // unusable.
  virtual Status AllReduceSum(float* data, int64_t n) = 0;
};

}  // namespace kiln
