// Host memory allocation through mmap, so that large blocks can take
// transparent huge pages (madvise) and come back zeroed.
#include "backend/memory_domain.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace kiln {
namespace {

constexpr size_t kHugePageThreshold = 4u << 20;

}  // namespace

Expected<void*> MemoryDomain::Allocate(size_t bytes) {
  if (bytes == 0) bytes = 64;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhausted("{}: cannot allocate {} bytes: {}", name_, bytes, std::strerror(errno));
  }
  if (bytes >= kHugePageThreshold) ::madvise(p, bytes, MADV_HUGEPAGE);
  size_t now = in_use_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void MemoryDomain::Free(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes == 0) bytes = 64;
  ::munmap(p, bytes);
  in_use_.fetch_sub(bytes);
}

Expected<DomainBuffer> DomainBuffer::Allocate(MemoryDomain& domain, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(void* p, domain.Allocate(bytes));
  DomainBuffer b;
  b.domain_ = &domain;
  b.data_ = p;
  b.bytes_ = bytes;
  return b;
}

DomainBuffer::~DomainBuffer() {
  if (domain_ != nullptr) domain_->Free(data_, bytes_);
}

DomainBuffer::DomainBuffer(DomainBuffer&& o) noexcept : domain_(o.domain_), data_(o.data_), bytes_(o.bytes_) {
  o.domain_ = nullptr;
  o.data_ = nullptr;
  o.bytes_ = 0;
}

DomainBuffer& DomainBuffer::operator=(DomainBuffer&& o) noexcept {
  if (this != &o) {
    if (domain_ != nullptr) domain_->Free(data_, bytes_);
    domain_ = o.domain_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.domain_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

MemoryDomain& HostMemory() {
  static MemoryDomain host("host", 0);
  return host;
}

}  // namespace kiln
