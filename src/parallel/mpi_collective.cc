// Polling MPI's non-blocking collectives. Within a pass: tests between
// yields of the core, never a sleep (a sleeping rank wakes up late on a busy
// host: on 2 shared cores 20 us sleeps made a tiny model's decode step
// 2-28 ms, yields 0.25 ms). Between passes (a follower waiting for rank 0):
// 1 ms sleeps, leaving the machine to others.
#include "parallel/mpi_collective.h"

#include <chrono>
#include <limits>
#include <thread>

namespace kiln {

MpiCollective::MpiCollective(MPI_Comm comm, double timeout_seconds) : comm_(comm), timeout_seconds_(timeout_seconds) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

Status MpiCollective::Wait(MPI_Request* request, const std::string& what, bool deadline) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_seconds_);
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (MPI_Test(request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      failed_ = true;
      return IoError("{}: MPI reported an error", what);
    }
    if (done != 0) return Status::Ok();
    if (polls < 200) continue;
    if (deadline && Clock::now() - start > limit) {
      failed_ = true;
      return IoError("{}: rank {} heard nothing from the other ranks within the collective time-out of {} s (a rank "
                     "died or stopped); the group of ranks cannot continue",
                     what, rank_, timeout_seconds_);
    }
    if (deadline) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(1000));
    }
  }
}

Status MpiCollective::AllReduceSum(float* data, int64_t n) {
  if (failed_) return IoError("all-reduce: the tensor-parallel group failed earlier");
  if (n < 0 || n > std::numeric_limits<int>::max()) return InvalidArgument("all-reduce of {} floats", n);
  MPI_Request request;
  if (MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_, &request) != MPI_SUCCESS) {
    failed_ = true;
    return IoError("all-reduce of {} floats: MPI refused it", n);
  }
  return Wait(&request, fmt::format("all-reduce of {} floats", n), true);
}

Status MpiCollective::Broadcast(int32_t* data, int64_t n, bool deadline) {
  if (failed_) return IoError("broadcast: the tensor-parallel group failed earlier");
  if (n < 0 || n > std::numeric_limits<int>::max()) return InvalidArgument("broadcast of {} ints", n);
  MPI_Request request;
  if (MPI_Ibcast(data, static_cast<int>(n), MPI_INT32_T, 0, comm_, &request) != MPI_SUCCESS) {
    failed_ = true;
    return IoError("broadcast of {} ints: MPI refused it", n);
  }
  return Wait(&request, fmt::format("broadcast of a forward pass ({} ints)", n), deadline);
}

}  // namespace kiln

namespace kiln {

Status MpiCollective::Barrier() {
  if (failed_) return IoError("barrier: the tensor-parallel group failed earlier");
  MPI_Request request;
  if (MPI_Ibarrier(comm_, &request) != MPI_SUCCESS) {
    failed_ = true;
    return IoError("barrier: MPI refused it");
  }
  return Wait(&request, "the barrier before finalizing", true);
}

}  // namespace kiln

namespace kiln {

Status MpiCollective::ISend(const float* data, int64_t n, int peer, int tag, MPI_Request* request) {
  if (failed_) return IoError("send to rank {}: the group failed earlier", peer);
  if (n < 0 || n > std::numeric_limits<int>::max()) return InvalidArgument("send of {} floats", n);
  if (MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, request) != MPI_SUCCESS) {
    failed_ = true;
    return IoError("send of {} floats to rank {}: MPI refused it", n, peer);
  }
  return Status::Ok();
}

Status MpiCollective::WaitSend(MPI_Request* request, int peer) {
  return Wait(request, fmt::format("the send of a pass's hidden state or logits to rank {}", peer), true);
}

Status MpiCollective::Send(const float* data, int64_t n, int peer, int tag) {
  MPI_Request request;
  KILN_RETURN_IF_ERROR(ISend(data, n, peer, tag, &request));
  return WaitSend(&request, peer);
}

Status MpiCollective::Recv(float* data, int64_t n, int peer, int tag) {
  if (failed_) return IoError("receive from rank {}: the group failed earlier", peer);
  if (n < 0 || n > std::numeric_limits<int>::max()) return InvalidArgument("receive of {} floats", n);
  MPI_Request request;
  if (MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag, comm_, &request) != MPI_SUCCESS) {
    failed_ = true;
    return IoError("receive of {} floats from rank {}: MPI refused it", n, peer);
  }
  return Wait(&request, fmt::format("the receive of a pass's hidden state or logits from rank {}", peer), true);
}

}  // namespace kiln
