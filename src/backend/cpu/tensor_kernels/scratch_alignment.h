// The parts a kernel carves out of its scratch memory start on cache lines,
// so that threads filling neighbouring parts never write one line.
#pragma once

#include <cstddef>

namespace kiln::cpu {

constexpr size_t kScratchAlignment = 64;

// `bytes` rounded up to a whole number of cache lines.
constexpr size_t AlignUp(size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

}  // namespace kiln::cpu
