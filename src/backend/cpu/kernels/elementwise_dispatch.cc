// Threading of the elementwise kernels.
#include "backend/cpu/kernels/elementwise_dispatch.h"

#include <algorithm>

namespace kiln::cpu {
namespace {

// Below this much work (elements x cost) a thread is not worth waking: a
// decode step's activations (a few thousand elements) take microseconds,
// about what a wake-up costs.
constexpr int64_t kMinWorkPerThread = 131072;
// Column pieces are whole multiples of this many elements (a cache line pair).
constexpr int64_t kColumnGrain = 32;

}  // namespace

void RunElementwise(const KernelContext& ctx, void (*kernel)(const ElementwiseArgs&),
                    const ElementwiseArgs& args, int64_t cost_per_element) {
  if (args.rows <= 0 || args.cols <= 0) return;
  const int64_t row_work = args.cols * cost_per_element;
  if (args.rows >= ctx.num_threads() || args.cols < 2 * kColumnGrain) {
    ParallelRanges(ctx, args.rows, std::max<int64_t>(1, kMinWorkPerThread / row_work),
                   [&](int64_t begin, int64_t end, int) {
                     ElementwiseArgs piece = args;
                     piece.a = args.a + begin * args.lda;
                     piece.b = args.b != nullptr ? args.b + begin * args.ldb : nullptr;
                     piece.out = args.out + begin * args.ldo;
                     piece.rows = end - begin;
                     kernel(piece);
                   });
    return;
  }
  // Few long rows (decoding): split the columns.
  const int64_t chunks = (args.cols + kColumnGrain - 1) / kColumnGrain;
  const int64_t min_chunks =
      std::max<int64_t>(1, kMinWorkPerThread / (args.rows * kColumnGrain * cost_per_element));
  ParallelRanges(ctx, chunks, min_chunks, [&](int64_t begin, int64_t end, int) {
    ElementwiseArgs piece = args;
    const int64_t c0 = begin * kColumnGrain;
    const int64_t c1 = std::min(args.cols, end * kColumnGrain);
    piece.a = args.a + c0;
    piece.b = args.b != nullptr ? args.b + c0 : nullptr;
    piece.out = args.out + c0;
    piece.cols = c1 - c0;
    kernel(piece);
  });
}

}  // namespace kiln::cpu
