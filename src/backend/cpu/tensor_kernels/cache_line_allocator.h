// An allocator whose storage starts on a 64-byte cache line, for a
// kernel's own packed weights: a 64-byte vector load from a plain vector's
// 16-byte aligned storage spans two lines.
#pragma once

#include <cstddef>
#include <new>

namespace kiln::cpu {

// (ResNet-18's dense 3x3 weights sat 16 or 48 bytes into a line in a
// plain vector: 1.03-1.07x the time on one thread.)
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

}  // namespace kiln::cpu
