// A large anonymous buffer backed by 4 KiB pages or by transparent huge
// pages, for measuring read bandwidth with each; and what the kernel
// actually gave it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln::bench {

enum class PageMode {
  kSmall,  // madvise(MADV_NOHUGEPAGE): 4 KiB pages
  kHuge,   // madvise(MADV_HUGEPAGE): transparent huge pages where the kernel allows
};

// "4k" or "thp".
const char* PageModeName(PageMode mode);

// The bracketed choice in /sys/kernel/mm/transparent_hugepage/enabled
// ("always", "madvise" or "never"), or "unavailable".
std::string TransparentHugePageSetting();

// Sum of AnonHugePages (in bytes) of the /proc/self/smaps mappings that
// overlap [begin, end). Fails on a malformed mapping header.
Expected<int64_t> ParseAnonHugeBytes(std::string_view smaps, uintptr_t begin, uintptr_t end);

// An mmap'd, 2 MiB-aligned buffer, advised for `mode`. Move-only.
class PageBuffer {
 public:
  // Maps `bytes` (rounded up to 2 MiB). Pages are not touched yet.
  static Expected<PageBuffer> Map(size_t bytes, PageMode mode);

  PageBuffer() = default;
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  ~PageBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  PageMode mode() const { return mode_; }

  // Bytes of the buffer backed by huge pages now (from /proc/self/smaps).
  Expected<int64_t> HugeBytes() const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  PageMode mode_ = PageMode::kSmall;
};

}  // namespace kiln::bench
