// Populates the page tables of read-only file mappings on a thread of its
// own. A forward pass over weights used in place from a mapped file would
// otherwise fault them in, 64 KiB at a time, on the critical path of the
// first token; at start-up the second core is idle while the tokenizer and
// the engine are built, so it can take those faults instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace kiln {

class BackgroundPrefault {
 public:
  // Starts populating `ranges` in order (MADV_POPULATE_READ, or a read of
  // each page where the kernel lacks it). REQUIRES: the ranges lie in
  // read-only file mappings that outlive this object.
  explicit BackgroundPrefault(std::vector<std::span<const uint8_t>> ranges);
  // Stops at the next chunk and waits for the thread.
  ~BackgroundPrefault();
  BackgroundPrefault(const BackgroundPrefault&) = delete;
  BackgroundPrefault& operator=(const BackgroundPrefault&) = delete;

  // Bytes populated so far (for tests and measurements).
  uint64_t populated_bytes() const { return populated_.load(std::memory_order_relaxed); }
  // Waits until every range is populated.
  void Wait();

 private:
  void Run(std::vector<std::span<const uint8_t>> ranges);

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> populated_{0};
  std::thread thread_;
};

}  // namespace kiln
