// What every oneDNN kernel of the CPU shares (defined in conv_onednn.cc):
// the process's one CPU engine, with oneDNN's ISA capped at kiln's
// (KILN_ISA) before the first primitive exists, and oneDNN's OpenMP team
// sized to the call's pool.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu {

dnnl::engine& OneDnnEngine();
void SetOneDnnThreadCount(int threads);

}  // namespace kiln::cpu
