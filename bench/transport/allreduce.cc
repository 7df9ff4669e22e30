#include "allreduce.h"

#include <algorithm>
#include <vector>

namespace kiln::transport {

AllreduceResult MeasureAllreduce(MPI_Comm comm, int64_t hidden, int64_t rows, int repeats,
                                 double min_seconds) {
  int rank = 0;
  int ranks = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  AllreduceResult result;
  result.hidden = hidden;
  result.rows = rows;
  result.ranks = ranks;
  const int64_t n = result.floats();
  std::vector<float> input(n);
  std::vector<float> output(n);
  for (int64_t i = 0; i < n; ++i) input[i] = AllreduceInput(rank, i);

  auto run = [&](int64_t times) {
    for (int64_t t = 0; t < times; ++t) {
      MPI_Allreduce(input.data(), output.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm);
    }
  };
  result.timing = TimeRepeated(comm, repeats, min_seconds, run);

  // Once more into a cleared output, which is then checked element by
  // element against the sum each rank computes for itself.
  std::fill(output.begin(), output.end(), 0.0f);
  run(1);
  float ranks_sum = 0;
  for (int r = 0; r < ranks; ++r) ranks_sum += static_cast<float>(r + 1);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; ++i) {
    if (output[i] != static_cast<float>(i % 251 + 1) * 0.25f * ranks_sum) ok = 0;
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  result.verified = all_ok == 1;
  for (float v : output) result.result_sum += v;
  result.result_first = n > 0 ? output[0] : 0.0f;
  return result;
}

}  // namespace kiln::transport
