// How the output of a numpy-broadcasting op is walked: as rows of one
// contiguous inner run, where each input either runs along (step 1) or
// repeats one element (step 0). Dimensions of size 1 are dropped and
// neighbours that every input walks the same way are merged first, so that
// the common cases (same shapes, a scalar, a per-channel bias on NCHW, a
// bias along the last axis) become few long rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::cpu {

struct BroadcastPlan {
  int64_t rows = 1;
  int64_t inner = 1;                               // elements per row (the output's rows are contiguous)
  std::vector<int64_t> step;                       // per input: 0 or 1 along the inner run
  std::vector<int64_t> outer;                      // the outer dimensions, outermost first
  std::vector<std::vector<int64_t>> outer_stride;  // per input, per outer dimension (elements)

  int num_inputs() const { return static_cast<int>(step.size()); }
};

// The plan for inputs of `inputs` dims broadcast to `out` (which they must
// broadcast to; shape inference has checked).
BroadcastPlan MakeBroadcastPlan(const std::vector<int64_t>& out,
                                const std::vector<std::vector<int64_t>>& inputs);

// Each input's offset at the start of a row, advanced row by row.
class BroadcastCursor {
 public:
  BroadcastCursor(const BroadcastPlan& plan, int64_t row);
  int64_t offset(int input) const { return offsets_[input]; }
  void Next();

 private:
  const BroadcastPlan& plan_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
};

}  // namespace kiln::cpu
