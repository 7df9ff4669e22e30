#include "core/page_prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

namespace kiln {
namespace {

// Small enough that a stop request is seen quickly, large enough that the
// system calls cost nothing next to the faults.
constexpr size_t kChunkBytes = size_t{4} << 20;

// MADV_WILLNEED on the runs of `range`'s pages that are not resident.
void ReadInMissingPages(std::span<const uint8_t> range, uintptr_t page) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
  const size_t pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
    return;
  }
  size_t i = 0;
  while (i < pages) {
    if (resident[i] & 1) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < pages && !(resident[j] & 1)) ++j;
    ::madvise(reinterpret_cast<void*>(begin + i * page), (j - i) * page, MADV_WILLNEED);
    i = j;
  }
}

}  // namespace

BackgroundPrefault::BackgroundPrefault(std::vector<std::span<const uint8_t>> ranges)
    : thread_([this, r = std::move(ranges)]() mutable { Run(std::move(r)); }) {}

BackgroundPrefault::~BackgroundPrefault() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void BackgroundPrefault::Wait() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundPrefault::Run(std::vector<std::span<const uint8_t>> ranges) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Pages not in the page cache yet are read in first, exactly the ranges
  // (MADV_WILLNEED reads a file mapping's range and no more): a fault on a
  // missing page would read 8 MiB around it, past the last range's end
  // into bytes nobody uses. Only the runs mincore finds missing are asked
  // for, so a warm start does not walk the cache twice.
  for (std::span<const uint8_t> range : ranges) {
    if (range.empty() || stop_.load(std::memory_order_relaxed)) continue;
    ReadInMissingPages(range, page);
  }
  bool populate_works = true;
  for (std::span<const uint8_t> range : ranges) {
    if (range.empty()) continue;
    // madvise takes page-aligned starts; the page holding the first byte is
    // part of the same mapping.
    uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
    while (begin < end) {
      if (stop_.load(std::memory_order_relaxed)) return;
      const uintptr_t chunk_end = std::min<uintptr_t>(end, begin + kChunkBytes);
      const size_t length = chunk_end - begin;
      if (populate_works && ::madvise(reinterpret_cast<void*>(begin), length, MADV_POPULATE_READ) != 0) {
        populate_works = false;  // an older kernel: fault the pages in by reading them
      }
      if (!populate_works) {
        uint8_t sum = 0;
        for (uintptr_t p = begin; p < chunk_end; p += page) sum ^= *reinterpret_cast<const volatile uint8_t*>(p);
        (void)sum;
      }
      populated_.fetch_add(length, std::memory_order_relaxed);
      begin = chunk_end;
    }
  }
}

}  // namespace kiln
