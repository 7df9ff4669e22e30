// A stand-in device's memory: host pages that only its own stream's copies
// and kernels may touch, filled with a poison pattern (all bits set: a NaN
// in every float format) when allocated and whenever their contents die,
// so that reading them without the right synchronization shows at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/memory_domain.h"

namespace kiln {

inline constexpr uint8_t kPoisonByte = 0xFF;

class PoisoningDomain : public MemoryDomain {
 public:
  using MemoryDomain::MemoryDomain;
  Expected<void*> Allocate(size_t bytes) override;
  void Discard(void* p, size_t bytes) override;
};

// Fills `rows` rows of `row_bytes`, `pitch` apart, with the poison.
void PoisonRows(void* p, size_t pitch, size_t row_bytes, size_t rows);

}  // namespace kiln
