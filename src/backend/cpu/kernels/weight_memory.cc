// Weight memory: host-domain buffers with the huge-page advice chosen once
// per process.
#include "backend/cpu/kernels/weight_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace kiln::cpu {

bool WeightsUseHugePages() {
  static const bool huge = [] {
    const char* v = std::getenv("KILN_WEIGHT_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return huge;
}

Expected<DomainBuffer> AllocateWeightMemory(size_t bytes) {
  KILN_ASSIGN_OR_RETURN(DomainBuffer buffer, DomainBuffer::Allocate(HostMemory(), bytes));
  // The host domain advises huge pages for large blocks already; the advice
  // is only ever taken back here.
  if (!WeightsUseHugePages() && buffer.size() > 0) ::madvise(buffer.data(), buffer.size(), MADV_NOHUGEPAGE);
  return buffer;
}

}  // namespace kiln::cpu
