// oneDNN's convolutions run on OpenMP threads. libgomp's default keeps those
// threads spinning for a while after every call, where they take the cores
// from kiln's own thread pool as it runs the next ops (a model mixing both
// then runs several times slower on a busy machine, and slower on a quiet
// one). libgomp reads OMP_WAIT_POLICY only when it is loaded, before main, so
// the command re-executes itself once with PASSIVE unless the user chose a
// policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT).
#pragma once

namespace kiln::cli {

// Returns only when the policy is already set or the re-execution failed
// (the command then runs as it is).
void EnsurePassiveOpenMpWait(char** argv);

}  // namespace kiln::cli
