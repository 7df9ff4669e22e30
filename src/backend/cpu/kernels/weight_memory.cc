// Weight memory: host-domain buffers carved from huge-page chunks, with the
// huge-page advice chosen once per process.
#include "backend/cpu/kernels/weight_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace kiln::cpu {
namespace {

constexpr size_t kHugePage = 2u << 20;
constexpr size_t kChunk = 32u << 20;  // carved into the smaller weights

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Weights come in many sizes, most of a small model's under a huge page
// (Qwen2.5-0.5B's attention matrices are under 1 MiB). Mapped one by one
// they got 4 KiB pages, and the larger ones huge pages only where their
// mapping happened to cover an aligned 2 MiB: a third of that model's
// repacked weights were on 4 KiB pages. So this domain hands out pieces of
// 2 MiB-aligned chunks advised as a whole; a weight of half a chunk or
// more gets an aligned mapping of its own. A chunk is unmapped when the
// last piece in it is freed; pieces are never reused, so they come zeroed.
class WeightDomain : public MemoryDomain {
 public:
  WeightDomain() : MemoryDomain("host weights", HostMemory().id()) {}

  Expected<void*> Allocate(size_t bytes) override {
    bytes = RoundUp(bytes == 0 ? 64 : bytes, 64);
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes >= kChunk / 2) {
      KILN_ASSIGN_OR_RETURN(Chunk c, Map(RoundUp(bytes, kHugePage)));
      c.used = c.size;
      c.live = 1;
      chunks_.push_back(c);
      return static_cast<void*>(c.base);
    }
    if (current_ < 0 || chunks_[current_].used + bytes > chunks_[current_].size) {
      KILN_ASSIGN_OR_RETURN(Chunk c, Map(kChunk));
      chunks_.push_back(c);
      current_ = static_cast<int64_t>(chunks_.size()) - 1;
    }
    Chunk& c = chunks_[current_];
    void* p = c.base + c.used;
    c.used += bytes;
    c.live += 1;
    return p;
  }

  void Free(void* p, size_t /*bytes*/) override {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto* at = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < chunks_.size(); ++i) {
      Chunk& c = chunks_[i];
      if (at < c.base || at >= c.base + c.size) continue;
      if (--c.live > 0 || static_cast<int64_t>(i) == current_) return;
      ::munmap(c.base, c.size);
      chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(i));
      if (current_ > static_cast<int64_t>(i)) --current_;
      return;
    }
  }

 private:
  struct Chunk {
    uint8_t* base = nullptr;
    size_t size = 0;
    size_t used = 0;
    int64_t live = 0;
  };

  // `size` bytes (a multiple of kHugePage) at a kHugePage boundary, advised.
  static Expected<Chunk> Map(size_t size) {
    void* p = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return ResourceExhausted("weight memory: cannot allocate {} bytes: {}", size, std::strerror(errno));
    }
    auto* raw = static_cast<uint8_t*>(p);
    auto* base = reinterpret_cast<uint8_t*>(RoundUp(reinterpret_cast<uintptr_t>(raw), kHugePage));
    if (base > raw) ::munmap(raw, static_cast<size_t>(base - raw));
    const size_t tail = static_cast<size_t>(raw + size + kHugePage - (base + size));
    if (tail > 0) ::munmap(base + size, tail);
    ::madvise(base, size, WeightsUseHugePages() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    Chunk c;
    c.base = base;
    c.size = size;
    return c;
  }

  std::mutex mu_;
  std::vector<Chunk> chunks_;
  int64_t current_ = -1;  // the chunk small weights are carved from
};

WeightDomain& WeightMemory() {
  static WeightDomain* domain = new WeightDomain();  // outlives every weight
  return *domain;
}

}  // namespace

bool WeightsUseHugePages() {
  static const bool huge = [] {
    const char* v = std::getenv("KILN_WEIGHT_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return huge;
}

Expected<DomainBuffer> AllocateWeightMemory(size_t bytes) { return DomainBuffer::Allocate(WeightMemory(), bytes); }

bool AdoptedWeightsAreCopied() {
  static const bool copy = [] {
    const char* v = std::getenv("KILN_ARTIFACT_WEIGHTS");
    return v != nullptr && std::strcmp(v, "copy") == 0;
  }();
  return copy;
}

Expected<DomainBuffer> AdoptWeightMemory(std::span<const uint8_t> bytes) {
  if (!AdoptedWeightsAreCopied()) return DomainBuffer::View(bytes.data(), bytes.size());
  KILN_ASSIGN_OR_RETURN(DomainBuffer copy, AllocateWeightMemory(bytes.size()));
  std::memcpy(copy.data(), bytes.data(), bytes.size());
  return copy;
}

}  // namespace kiln::cpu
