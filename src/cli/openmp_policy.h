// oneDNN's convolutions run on OpenMP threads. libgomp's default keeps those
// threads spinning for a long while (~0.3 s) after every call, where they
// take the cores from kiln's own thread pool as it runs the next ops (a
// model mixing both then runs several times slower on a busy machine).
// Sleeping at once (OMP_WAIT_POLICY=PASSIVE) costs a futex wake-up per
// convolution instead: ResNet-18 and the YOLOv8n-style detector ran 9-15 %
// slower that way on a quiet 2-core machine than with a spin of a few
// thousand rounds, which still lets go within tens of microseconds
// (bench/RESULTS.md). libgomp reads these variables only when it is loaded,
// before main, so a command that runs an ONNX graph (an argument naming a
// .onnx file, or a .kiln artifact compiled from one) re-executes itself once with GOMP_SPINCOUNT=kOpenMpSpinCount
// unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT). Other
// commands never start an OpenMP team, and a second process start would
// cost them tens of milliseconds of start-up.
#pragma once

namespace kiln::cli {

inline constexpr const char* kOpenMpSpinCount = "3000";

// Returns only when no argument names a .onnx file (or an ONNX artifact), the policy is already
// set, or the re-execution failed (the command then runs as it is).
void EnsureShortOpenMpSpin(int argc, char** argv);

}  // namespace kiln::cli
