// Internal: the loops of broadcasting kernels over a BroadcastPlan, split
// by rows over the pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cpu/tensor_kernels/broadcast_plan.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"

namespace kiln::cpu {

// row(r, cursor, begin, end) for columns [begin, end) of every output row:
// rows split over the pool, or, when there are only a few long rows (two
// same-shape tensors merge into one), each row's columns.
template <typename RowFn>
void ForEachBroadcastRow(ThreadPool* pool, const BroadcastPlan& plan, RowFn&& row) {
  const int64_t inner = std::max<int64_t>(plan.inner, 1);
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads > 1 && plan.rows < 2 * threads && plan.inner >= 2 * kParallelGrain) {
    BroadcastCursor cursor(plan, 0);
    for (int64_t r = 0; r < plan.rows; ++r, cursor.Next()) {
      SplitRanges(pool, plan.inner, kParallelGrain,
                     [&](int64_t begin, int64_t end) { row(r, cursor, begin, end); });
    }
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / inner);
  SplitRanges(pool, plan.rows, grain, [&](int64_t begin, int64_t end) {
    BroadcastCursor cursor(plan, begin);
    for (int64_t r = begin; r < end; ++r, cursor.Next()) row(r, cursor, int64_t{0}, plan.inner);
  });
}

// out = f(a, b) elementwise with broadcasting; a and b are inputs 0 and 1
// of the plan, out is contiguous.
template <typename A, typename B, typename U, typename F>
void BroadcastBinary(ThreadPool* pool, const BroadcastPlan& plan, const A* a, const B* b, U* out, F f) {
  const int64_t n = plan.inner;
  const int64_t sa = plan.step[0];
  const int64_t sb = plan.step[1];
  ForEachBroadcastRow(pool, plan, [&](int64_t r, const BroadcastCursor& c, int64_t begin, int64_t end) {
    const A* pa = a + c.offset(0) + begin * sa;
    const B* pb = b + c.offset(1) + begin * sb;
    U* po = out + r * n + begin;
    const int64_t m = end - begin;
    if (sa != 0 && sb != 0) {
      for (int64_t i = 0; i < m; ++i) po[i] = f(pa[i], pb[i]);
    } else if (sa != 0) {
      const B vb = *pb;
      for (int64_t i = 0; i < m; ++i) po[i] = f(pa[i], vb);
    } else if (sb != 0) {
      const A va = *pa;
      for (int64_t i = 0; i < m; ++i) po[i] = f(va, pb[i]);
    } else {
      const U v = f(*pa, *pb);
      for (int64_t i = 0; i < m; ++i) po[i] = v;
    }
  });
}

}  // namespace kiln::cpu
