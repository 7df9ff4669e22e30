// The key columns each query of decomposed attention may see, as the
// column ranges MaskedSoftmax takes: causal (keys up to and including the
// query's own position) and, with a sliding window, only the last `window`
// of those.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// For h < heads and m < tokens (one sequence's queries, at positions[m]):
// begin[h * tokens + m] = the first visible key position, end[...] = one
// past the last. Every head of a query sees the same range.
// window <= 0: full causal attention.
void CausalKeyRanges(int64_t heads, int64_t tokens, const int32_t* positions, int64_t window, int32_t* begin,
                     int32_t* end);

namespace ref {
// The same by testing every key position against the rule.
void CausalKeyRanges(int64_t heads, int64_t tokens, const int32_t* positions, int64_t window, int32_t* begin,
                     int32_t* end);
}  // namespace ref

}  // namespace kiln::cpu
