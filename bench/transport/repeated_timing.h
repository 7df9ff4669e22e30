// The timing protocol every measurement of kiln_bench_transport shares:
// one untimed warm-up, a calibration that picks how many operations a
// repetition runs, then timed repetitions started together on all ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <mpi.h>

namespace kiln::transport {

struct RepeatedTiming {
  int64_t operations_per_repetition = 0;
  // Seconds per operation, one entry per repetition: the slowest rank's
  // time for the repetition divided by its operations.
  std::vector<double> seconds;
};

// Times `run(n)`, which performs the operation n times and must be called
// by every rank of `comm` alike. A repetition runs enough operations to last
// at least `min_seconds` (as rank 0 measured one, at most 100,000).
RepeatedTiming TimeRepeated(MPI_Comm comm, int repeats, double min_seconds,
                            const std::function<void(int64_t)>& run);

}  // namespace kiln::transport
