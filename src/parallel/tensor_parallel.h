// Tensor parallelism over MPI: `mpirun -np T kiln generate|serve|bench ...
// --tensor-parallel-size T`. Every rank loads its shard of the weights
// (WeightStore::TensorParallelShard) and compiles it with the all-reduces
// bound to an MpiCollective. Rank 0 runs the engine (scheduler, sampling,
// HTTP) and sends each forward pass's batch to the other ranks, which run it
// on their shard until rank 0 stops them at exit.
// Pipeline parallelism (`--pipeline-parallel-size P`, T = 1) starts the
// same way: every rank loads its stage (WeightStore::PipelineStage) and
// receives the batch as above; rank 0 runs the first stage of each
// micro-batch and the hidden states go from rank to rank by point-to-point
// messages, the last rank sending the logits back to rank 0.
#pragma once

#include "core/status.h"
#include "engine/engine_options.h"

namespace kiln {

struct TensorParallelStart {
  bool runs_engine = false;  // rank 0: go on with the command
  int exit_code = 0;         // the other ranks: their follower loop has ended so
};

// Joins the MPI job this process was started in. Errors when it was not
// started by mpirun, or mpirun started another number of ranks than
// tensor_parallel_size x pipeline_parallel_size. On rank 0, fills in
// options' collective, before_forward and (unless set) threads: the
// host's cores divided by the ranks on it; the group is stopped and MPI
// finalized at exit. On the other ranks, runs the follower loop to its end.
Expected<TensorParallelStart> StartTensorParallel(EngineOptions* options);

}  // namespace kiln
