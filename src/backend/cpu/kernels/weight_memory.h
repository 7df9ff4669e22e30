// Memory for weights the CPU backend copies at load (packed panels, repacked
// quantized blocks): anonymous memory in 2 MiB-aligned chunks advised for
// transparent huge pages, shared by the smaller weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/memory_domain.h"
#include "core/status.h"

namespace kiln::cpu {

// Zero-filled, 64-byte aligned host memory of `bytes` for weights. Streaming
// reads from huge pages run about 40% faster here than from 4 KiB pages
// (fewer TLB misses), and files mapped with mmap never get them: so weights
// that are copied anyway go to anonymous memory advised MADV_HUGEPAGE.
// KILN_WEIGHT_HUGE_PAGES=0 in the environment asks for 4 KiB pages instead
// (to measure the difference). Fails when the system refuses the memory.
Expected<DomainBuffer> AllocateWeightMemory(size_t bytes);

// Whether AllocateWeightMemory advises huge pages in this process.
bool WeightsUseHugePages();

// Packed weight bytes stored in a compiled artifact's mapping, as the
// kernels will read them: the mapping itself, used in place (the default),
// or with KILN_ARTIFACT_WEIGHTS=copy a copy in AllocateWeightMemory's
// huge pages. `bytes` must outlive the result when used in place.
Expected<DomainBuffer> AdoptWeightMemory(std::span<const uint8_t> bytes);

// Whether AdoptWeightMemory copies in this process.
bool AdoptedWeightsAreCopied();

}  // namespace kiln::cpu
