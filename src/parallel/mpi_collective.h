// The Collective of a tensor-parallel group over MPI: non-blocking
// collectives polled against a deadline, so that a rank that stops
// answering fails the pass with a clear error instead of hanging it. Once a
// collective has timed out the group is unusable (an MPI collective cannot
// be withdrawn): every later call fails at once.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "backend/collective.h"

namespace kiln {

class MpiCollective : public Collective {
 public:
  MpiCollective(MPI_Comm comm, double timeout_seconds);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduceSum(float* data, int64_t n) override;

  // Rank 0's `n` ints reach every rank. With a deadline (within a pass)
  // fails like AllReduceSum; without (a follower idle between passes) waits
  // as long as it takes, sleeping between polls.
  Status Broadcast(int32_t* data, int64_t n, bool deadline);

  // Pipeline parallelism: `n` floats to or from rank `peer` (tag: which
  // stream of messages), within the time-out like AllReduceSum. A send
  // started with ISend is finished by WaitSend.
  Status Send(const float* data, int64_t n, int peer, int tag);
  Status Recv(float* data, int64_t n, int peer, int tag);
  Status ISend(const float* data, int64_t n, int peer, int tag, MPI_Request* request);
  Status WaitSend(MPI_Request* request, int peer);

  // Every rank has reached this point, within the time-out: what a rank
  // checks before MPI_Finalize, which would wait forever on a stopped peer.
  Status Barrier();

  bool failed() const { return failed_; }
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  Status Wait(MPI_Request* request, const std::string& what, bool deadline);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  double timeout_seconds_;
  bool failed_ = false;
};

}  // namespace kiln
