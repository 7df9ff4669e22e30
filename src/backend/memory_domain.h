// A memory domain is one address space a backend computes in (host memory,
// a device's memory). Allocations are 64-byte aligned and counted, so that
// start-up sizing and reports can say where every byte went.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace kiln {

class MemoryDomain {
 public:
  MemoryDomain(std::string name, int32_t id) : name_(std::move(name)), id_(id) {}
  virtual ~MemoryDomain() = default;

  const std::string& name() const { return name_; }
  int32_t id() const { return id_; }

  // Zero-filled, 64-byte aligned memory. Large blocks are advised for huge
  // pages. Errors when the system refuses.
  virtual Expected<void*> Allocate(size_t bytes);
  // REQUIRES: p came from Allocate(bytes) of this domain.
  virtual void Free(void* p, size_t bytes);

  size_t bytes_in_use() const { return in_use_.load(); }
  size_t peak_bytes() const { return peak_.load(); }

 private:
  std::string name_;
  int32_t id_;
  std::atomic<size_t> in_use_{0};
  std::atomic<size_t> peak_{0};
};

// An owning buffer in a domain.
class DomainBuffer {
 public:
  DomainBuffer() = default;
  static Expected<DomainBuffer> Allocate(MemoryDomain& domain, size_t bytes);
  ~DomainBuffer();
  DomainBuffer(DomainBuffer&& o) noexcept;
  DomainBuffer& operator=(DomainBuffer&& o) noexcept;
  DomainBuffer(const DomainBuffer&) = delete;
  DomainBuffer& operator=(const DomainBuffer&) = delete;

  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return bytes_; }

 private:
  MemoryDomain* domain_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Domain 0: the host's memory, where the CPU backend computes.
MemoryDomain& HostMemory();

}  // namespace kiln
