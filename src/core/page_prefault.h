// Populates the page tables of read-only file mappings a chunk at a time,
// for a caller with idle time to spend. A forward pass over weights used in
// place from a mapped file would otherwise fault them in, 64 KiB at a time,
// on the critical path of the first token; at start-up the engine waits
// for its tokenizer to be built on the other core, and takes those faults
// meanwhile instead. (A thread of its own was slower on two cores: a third
// runnable thread slowed the tokenizer and the compile more than the faults
// it saved.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace kiln {

class PagePrefault {
 public:
  // REQUIRES: the ranges lie in read-only file mappings that outlive this
  // object, or that `owner` (kept here) keeps mapped.
  explicit PagePrefault(std::vector<std::span<const uint8_t>> ranges, std::shared_ptr<const void> owner = nullptr);
  PagePrefault(const PagePrefault&) = delete;
  PagePrefault& operator=(const PagePrefault&) = delete;

  // Asks the kernel to read in the ranges' pages that are not in the page
  // cache yet, exactly those, without waiting for them: a fault on a
  // missing page would read 8 MiB around it, into bytes nobody uses. Once;
  // the first Step does it if no call did. The ranges' aligned 2 MiB pages
  // are advised for huge pages at construction; missing ones among them
  // are left to Step and faults, which read them in as 2 MiB pages (a
  // fault there reads at most 4 MiB about it).
  void ReadInMissingPages();
  // Populates the next chunk of at most kChunkBytes (MADV_POPULATE_READ,
  // or a read of each page where the kernel lacks it). Returns false,
  // doing nothing, once every range is done.
  bool Step();
  bool done() const { return range_ >= ranges_.size(); }
  // Bytes populated so far (for tests and measurements).
  uint64_t populated_bytes() const { return populated_; }

  // Small enough that a caller checking between steps overshoots what it
  // waits for by a fraction of a millisecond; large enough that the system
  // calls cost nothing next to the faults.
  static constexpr size_t kChunkBytes = size_t{1} << 20;

 private:
  std::vector<std::span<const uint8_t>> ranges_;
  std::shared_ptr<const void> owner_;
  // The address spans advised for huge pages.
  std::vector<std::pair<uintptr_t, uintptr_t>> huge_;
  size_t range_ = 0;    // the range being populated
  size_t offset_ = 0;   // from its first page's start
  bool read_in_ = false;
  bool populate_works_ = true;
  uint64_t populated_ = 0;
};

}  // namespace kiln
