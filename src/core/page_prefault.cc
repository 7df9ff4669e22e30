#include "core/page_prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

namespace kiln {
namespace {

constexpr uintptr_t kHugePageBytes = uintptr_t{2} << 20;

uintptr_t AlignUpTo(uintptr_t x, uintptr_t to) { return (x + to - 1) / to * to; }

// MADV_WILLNEED on the runs of `range`'s pages that are not resident, a
// chunk at a time. A chunk whose first page is resident is taken as
// resident: mincore looks every page up in the page cache (about 130 ns a
// page, 20 ms for a 0.5B model's weights), which a warm start would spend
// on its critical path for nothing; one probe a chunk costs a microsecond.
// Pages missing behind a resident first page are read by Step instead.
// Each request stays within a chunk, well under the kernel's cap on one
// WILLNEED (the device's read-ahead size), which a longer run would exceed.
// Chunks inside a huge-page span are left to Step: WILLNEED would
// cache them in 4 KiB pages, where a fault in a huge-page range reads them
// in 2 MiB pages.
using Spans = std::vector<std::pair<uintptr_t, uintptr_t>>;

// Whether [begin, end) lies in one of `spans`.
bool Inside(const Spans& spans, uintptr_t begin, uintptr_t end) {
  for (const auto& [b, e] : spans) {
    if (begin >= b && end <= e) return true;
  }
  return false;
}

void ReadInMissingRuns(std::span<const uint8_t> range, uintptr_t page, const Spans& huge) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
  std::vector<unsigned char> resident(PagePrefault::kChunkBytes / page + 1);
  for (uintptr_t chunk = begin; chunk < end; chunk += PagePrefault::kChunkBytes) {
    const uintptr_t chunk_end = std::min<uintptr_t>(end, chunk + PagePrefault::kChunkBytes);
    if (Inside(huge, chunk, chunk_end)) continue;
    unsigned char first = 0;
    if (::mincore(reinterpret_cast<void*>(chunk), page, &first) == 0 && (first & 1)) continue;
    const size_t pages = (chunk_end - chunk + page - 1) / page;
    if (::mincore(reinterpret_cast<void*>(chunk), chunk_end - chunk, resident.data()) != 0) {
      ::madvise(reinterpret_cast<void*>(chunk), chunk_end - chunk, MADV_WILLNEED);
      continue;
    }
    size_t i = 0;
    while (i < pages) {
      if (resident[i] & 1) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < pages && !(resident[j] & 1)) ++j;
      ::madvise(reinterpret_cast<void*>(chunk + i * page), (j - i) * page, MADV_WILLNEED);
      i = j;
    }
  }
}

}  // namespace

PagePrefault::PagePrefault(std::vector<std::span<const uint8_t>> ranges, std::shared_ptr<const void> owner)
    : ranges_(std::move(ranges)), owner_(std::move(owner)) {
  // Weights read whole can be mapped a 2 MiB page at a time where the page
  // cache holds them in 2 MiB pages, as it does for a file written in
  // aligned 2 MiB pieces (format/artifact_file.h) or read in through a
  // huge-page range: one page-table entry instead of 512, so filling the
  // tables of a 0.5B model's weights takes well under a millisecond
  // rather than tens. The advice covers the aligned 2 MiB pages of the
  // spans the ranges make together (sections a page's padding apart are
  // one span: one advised mapping, not one per section).
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (std::span<const uint8_t> range : ranges_) {
    if (range.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(range.data());
    spans.emplace_back(begin, begin + range.size());
  }
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> merged;
  for (const auto& s : spans) {
    if (!merged.empty() && s.first <= merged.back().second + page) {
      merged.back().second = std::max(merged.back().second, s.second);
    } else {
      merged.push_back(s);
    }
  }
  for (const auto& [span_begin, span_end] : merged) {
    const uintptr_t begin = AlignUpTo(span_begin, kHugePageBytes);
    const uintptr_t end = span_end / kHugePageBytes * kHugePageBytes;
    if (end > begin && ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) {
      // A fault there reads its own 2 MiB page, not the next one too, which
      // past a span's end would be bytes no pass reads.
      ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_RANDOM);
      huge_.emplace_back(begin, end);
    }
  }
}

void PagePrefault::ReadInMissingPages() {
  if (read_in_) return;
  read_in_ = true;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // MADV_WILLNEED reads a file mapping's range and no more. Only the runs
  // found missing are asked for, so a warm start does not walk the cache
  // twice.
  for (std::span<const uint8_t> range : ranges_) {
    if (!range.empty()) ReadInMissingRuns(range, page, huge_);
  }
}

bool PagePrefault::Step() {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  ReadInMissingPages();
  while (range_ < ranges_.size()) {
    const std::span<const uint8_t> range = ranges_[range_];
    // madvise takes page-aligned starts; the page holding the first byte is
    // part of the same mapping.
    const uintptr_t first = reinterpret_cast<uintptr_t>(range.data()) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
    const uintptr_t begin = first + offset_;
    if (range.empty() || begin >= end) {
      ++range_;
      offset_ = 0;
      continue;
    }
    const uintptr_t chunk_end = std::min<uintptr_t>(end, begin + kChunkBytes);
    const size_t length = chunk_end - begin;
    if (populate_works_ && ::madvise(reinterpret_cast<void*>(begin), length, MADV_POPULATE_READ) != 0) {
      populate_works_ = false;  // an older kernel: fault the pages in by reading them
    }
    if (!populate_works_) {
      uint8_t sum = 0;
      for (uintptr_t p = begin; p < chunk_end; p += page) sum ^= *reinterpret_cast<const volatile uint8_t*>(p);
      (void)sum;
    }
    populated_ += length;
    offset_ += length;
    return true;
  }
  return false;
}

}  // namespace kiln
