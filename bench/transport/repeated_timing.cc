#include "repeated_timing.h"

#include <algorithm>
#include <cmath>

namespace kiln::transport {

RepeatedTiming TimeRepeated(MPI_Comm comm, int repeats, double min_seconds,
                            const std::function<void(int64_t)>& run) {
  // Warm-up: connections, registrations and first touches of the buffers
  // happen here, outside every timed region.
  run(1);
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  run(1);
  double one = MPI_Wtime() - start;
  MPI_Bcast(&one, 1, MPI_DOUBLE, 0, comm);

  RepeatedTiming timing;
  const double wanted = one > 0 ? std::ceil(min_seconds / one) : 100000.0;
  timing.operations_per_repetition = static_cast<int64_t>(std::clamp(wanted, 1.0, 100000.0));
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    run(timing.operations_per_repetition);
    double elapsed = MPI_Wtime() - t0;
    double slowest = 0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    timing.seconds.push_back(slowest / static_cast<double>(timing.operations_per_repetition));
  }
  return timing;
}

}  // namespace kiln::transport
