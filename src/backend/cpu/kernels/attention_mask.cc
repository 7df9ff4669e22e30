// Causal and sliding-window key ranges.
#include "backend/cpu/kernels/attention_mask.h"

#include <algorithm>

namespace kiln::cpu {

void CausalKeyRanges(int64_t heads, int64_t tokens, const int32_t* positions, int64_t window, int32_t* begin,
                     int32_t* end) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t m = 0; m < tokens; ++m) {
      const int32_t p = positions[m];
      begin[h * tokens + m] = window > 0 ? std::max<int32_t>(0, p - static_cast<int32_t>(window) + 1) : 0;
      end[h * tokens + m] = p + 1;
    }
  }
}

namespace ref {

void CausalKeyRanges(int64_t heads, int64_t tokens, const int32_t* positions, int64_t window, int32_t* begin,
                     int32_t* end) {
  for (int64_t m = 0; m < tokens; ++m) {
    const int32_t query = positions[m];
    int32_t first = -1, last = -1;
    for (int32_t key = 0; key <= query; ++key) {
      const bool visible = window <= 0 || query - key < window;
      if (!visible) continue;
      if (first < 0) first = key;
      last = key;
    }
    for (int64_t h = 0; h < heads; ++h) {
      begin[h * tokens + m] = first;
      end[h * tokens + m] = last + 1;
    }
  }
}

}  // namespace ref
}  // namespace kiln::cpu
