// Poisoned device memory.
#include "testaccel/poisoning_domain.h"

#include <cstring>

namespace kiln {

Expected<void*> PoisoningDomain::Allocate(size_t bytes) {
  KILN_ASSIGN_OR_RETURN(void* p, MemoryDomain::Allocate(bytes));
  std::memset(p, kPoisonByte, bytes == 0 ? 64 : bytes);
  return p;
}

void PoisoningDomain::Discard(void* p, size_t bytes) { std::memset(p, kPoisonByte, bytes); }

void PoisonRows(void* p, size_t pitch, size_t row_bytes, size_t rows) {
  auto* d = static_cast<uint8_t*>(p);
  for (size_t r = 0; r < rows; ++r) std::memset(d + r * pitch, kPoisonByte, row_bytes);
}

}  // namespace kiln
