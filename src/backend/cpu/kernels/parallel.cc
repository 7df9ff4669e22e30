// Per-thread scratch buffers for the kernels.
#include "backend/cpu/kernels/parallel.h"

#include <cstdlib>
#include <memory>
#include <new>

namespace kiln::cpu {
namespace {

struct FreeAligned {
  void operator()(float* p) const { std::free(p); }
};

struct Scratch {
  std::unique_ptr<float, FreeAligned> data;
  int64_t floats = 0;
};

}  // namespace

float* ThreadScratch(ScratchSlot slot, int64_t floats) {
  thread_local Scratch scratch[static_cast<int>(ScratchSlot::kCount)];
  Scratch& s = scratch[static_cast<int>(slot)];
  if (s.floats < floats) {
    const int64_t grown = floats + floats / 4;
    const size_t bytes = (static_cast<size_t>(grown) * sizeof(float) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    s.data.reset(static_cast<float*>(p));
    s.floats = grown;
  }
  return s.data.get();
}

}  // namespace kiln::cpu
