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
  CountAllocation(bytes);
  return p;
}

void MemoryDomain::CountAllocation(size_t bytes) {
  size_t now = in_use_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

void MemoryDomain::Free(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes == 0) bytes = 64;
  ::munmap(p, bytes);
  CountFree(bytes);
}

namespace {

void CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes, size_t rows) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (dst_pitch == row_bytes && src_pitch == row_bytes) {
    std::memcpy(d, s, row_bytes * rows);
    return;
  }
  for (size_t r = 0; r < rows; ++r) std::memcpy(d + r * dst_pitch, s + r * src_pitch, row_bytes);
}

}  // namespace

void MemoryDomain::CopyFromHost(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                                size_t rows) {
  CopyRows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
}

void MemoryDomain::CopyToHost(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                              size_t rows) {
  CopyRows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
}

void MemoryDomain::CopyWithin(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                              size_t rows) {
  CopyRows(dst, dst_pitch, src, src_pitch, row_bytes, rows);
}

Expected<DomainBuffer> DomainBuffer::Allocate(MemoryDomain& domain, size_t bytes) {
  KILN_ASSIGN_OR_RETURN(void* p, domain.Allocate(bytes));
  DomainBuffer b;
  b.domain_ = &domain;
  b.data_ = p;
  b.bytes_ = bytes;
  return b;
}

DomainBuffer DomainBuffer::View(const void* data, size_t bytes) {
  DomainBuffer b;
  b.data_ = const_cast<void*>(data);  // packed weights are only read
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

int32_t NewDomainId() {
  static std::atomic<int32_t> next{1};
  return next.fetch_add(1);
}

MemoryDomain& HostMemory() {
  static MemoryDomain host("host", 0);
  return host;
}

}  // namespace kiln
