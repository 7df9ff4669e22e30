// What every oneDNN kernel of the CPU shares (defined in conv_onednn.cc):
// the process's one CPU engine, with oneDNN's ISA capped at kiln's
// (KILN_ISA) before the first primitive exists, oneDNN's OpenMP team
// sized to the call's pool, and the name under which a compiled artifact
// stores weights in the format a primitive picked.
#pragma once

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::cpu {

dnnl::engine& OneDnnEngine();
void SetOneDnnThreadCount(int threads);

// The weights' format as oneDNN picked it for this machine (data type,
// padded dims, strides, inner blocks, extra flags), so that stored weights
// are only used by a primitive that reads exactly that format.
std::string OneDnnWeightsLayoutName(const dnnl::memory::desc& desc);

}  // namespace kiln::cpu
