#include "kv_block_transfer.h"

#include <algorithm>
#include <vector>

#include "byte_pattern.h"

namespace kiln::transport {

KvBlockResult MeasureKvBlocks(MPI_Comm comm, const KvShape& shape, const TransportOptions& options) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  KvBlockResult result;
  result.shape = shape;
  result.block_tokens = options.block_tokens;
  result.block_bytes = KvBlockBytes(shape, options.block_tokens, options.kv_dtype_bytes);
  result.stream_blocks = options.stream_blocks;
  result.one_block =
      MeasurePingPong(comm, result.block_bytes, options.repeats, options.min_repetition_ms / 1e3);

  const int64_t block = result.block_bytes;
  const int64_t blocks = options.stream_blocks;
  std::vector<uint8_t> kv(rank <= 1 ? block * blocks : 0);
  auto seed_of = [](int64_t b) { return static_cast<uint64_t>(b) * 7919 + 17; };
  if (rank == 0) {
    for (int64_t b = 0; b < blocks; ++b) FillPattern(kv.data() + b * block, block, seed_of(b));
  }
  std::vector<MPI_Request> requests(blocks);
  auto run = [&](int64_t times) {
    for (int64_t t = 0; t < times; ++t) {
      if (rank == 0) {
        for (int64_t b = 0; b < blocks; ++b) {
          MPI_Isend(kv.data() + b * block, static_cast<int>(block), MPI_BYTE, 1, 1, comm, &requests[b]);
        }
        MPI_Waitall(static_cast<int>(blocks), requests.data(), MPI_STATUSES_IGNORE);
        MPI_Recv(nullptr, 0, MPI_BYTE, 1, 2, comm, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        for (int64_t b = 0; b < blocks; ++b) {
          MPI_Irecv(kv.data() + b * block, static_cast<int>(block), MPI_BYTE, 0, 1, comm, &requests[b]);
        }
        MPI_Waitall(static_cast<int>(blocks), requests.data(), MPI_STATUSES_IGNORE);
        MPI_Send(nullptr, 0, MPI_BYTE, 0, 2, comm);
      }
    }
  };
  result.stream = TimeRepeated(comm, options.repeats, options.min_repetition_ms / 1e3, run);

  if (rank == 1) std::fill(kv.begin(), kv.end(), uint8_t{0});
  run(1);
  int ok = 1;
  if (rank == 1) {
    for (int64_t b = 0; b < blocks && ok; ++b)
      ok = HasPattern(kv.data() + b * block, block, seed_of(b)) ? 1 : 0;
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  result.stream_verified = all_ok == 1;
  return result;
}

}  // namespace kiln::transport
