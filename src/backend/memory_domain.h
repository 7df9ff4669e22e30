// A memory domain is one address space a backend computes in (host memory,
// a device's memory). Allocations are 64-byte aligned and counted, so that
// start-up sizing and reports can say where every byte went. The host reads
// a device's memory only through the domain's copies, which run on the
// owning backend's stream (Backend::EnqueueCopy).
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

  // Copies `rows` rows of `row_bytes`, each `*_pitch` bytes after the
  // previous one, into this domain from host memory, out of it into host
  // memory, or within it. Synchronous: called on the owning stream's thread.
  virtual void CopyFromHost(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                            size_t rows);
  virtual void CopyToHost(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                          size_t rows);
  virtual void CopyWithin(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                          size_t rows);
  // The contents of [p, p + bytes) are dead (a pass ended): a debugging
  // domain poisons them so that a stale read shows. Called by the host
  // after synchronizing the owning stream.
  virtual void Discard(void* p, size_t bytes) {}

  size_t bytes_in_use() const { return in_use_.load(); }
  size_t peak_bytes() const { return peak_.load(); }

 protected:
  // For domains that allocate elsewhere (a device runtime): the counts.
  void CountAllocation(size_t bytes);
  void CountFree(size_t bytes) { in_use_.fetch_sub(bytes); }

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
  // Host memory owned elsewhere (a mapped file's bytes), never freed here.
  static DomainBuffer View(const void* data, size_t bytes);
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

// A fresh id for a device's domain (1, 2, ...), unique in the process.
int32_t NewDomainId();

}  // namespace kiln
