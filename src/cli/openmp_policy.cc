#include "cli/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace kiln::cli {

void EnsureShortOpenMpSpin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when exec failed (no /proc): run with libgomp's default.
}

}  // namespace kiln::cli
