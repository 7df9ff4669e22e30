#include "ping_pong.h"

#include <algorithm>
#include <vector>

#include "byte_pattern.h"

namespace kiln::transport {

PingPongResult MeasurePingPong(MPI_Comm comm, int64_t bytes, int repeats, double min_seconds) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const int count = static_cast<int>(bytes);
  const uint64_t seed = static_cast<uint64_t>(bytes);
  std::vector<uint8_t> sent(rank == 0 ? bytes : 0);
  std::vector<uint8_t> received(rank <= 1 ? bytes : 0);
  if (rank == 0) FillPattern(sent.data(), sent.size(), seed);

  auto run = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (rank == 0) {
        MPI_Send(sent.data(), count, MPI_BYTE, 1, 0, comm);
        MPI_Recv(received.data(), count, MPI_BYTE, 1, 0, comm, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(received.data(), count, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(received.data(), count, MPI_BYTE, 0, 0, comm);
      }
    }
  };
  PingPongResult result;
  result.bytes = bytes;
  result.one_way = TimeRepeated(comm, repeats, min_seconds, run);
  for (double& s : result.one_way.seconds) s /= 2;  // a round trip is two messages

  // One more round trip into cleared buffers, so that what is checked
  // arrived now.
  std::fill(received.begin(), received.end(), uint8_t{0});
  run(1);
  int ok = rank > 1 || HasPattern(received.data(), received.size(), seed) ? 1 : 0;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  result.verified = all_ok == 1;
  return result;
}

}  // namespace kiln::transport
