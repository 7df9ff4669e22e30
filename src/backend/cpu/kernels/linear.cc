// Splitting the linear layer over threads: output columns in panel ranges,
// and rows too once there are many.
#include "backend/cpu/kernels/linear.h"

#include <algorithm>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/parallel.h"

namespace kiln::cpu {
namespace {

// Rows from which threads split rows as well as columns (the vector
// kernels' cache-blocked path starts there too), and the least number of
// panels worth giving a thread in that regime.
constexpr int64_t kManyRows = 16;
constexpr int64_t kMinPanelsPerThread = 8;
constexpr int64_t kRowTile = 6;

}  // namespace

void Linear(const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx, const PackedWeight& w,
            const float* bias, float* y, int64_t ldy) {
  if (rows <= 0 || w.empty()) return;
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t panels = w.panels();
  const int64_t threads = ctx.num_threads();
  LinearArgs args{};
  args.x = x;
  args.ldx = ldx;
  args.w_type = ElemTypeOf(w.dtype());
  args.w_panels = w.data();
  args.n_total = w.rows();
  args.k_total = w.cols();
  args.bias = bias;
  args.y = y;
  args.ldy = ldy;
  if (rows < kManyRows) {
    // Decoding: the weights are the work; threads claim chunks of panels.
    const int64_t panel_bytes = static_cast<int64_t>(w.bytes()) / std::max<int64_t>(panels, 1);
    const int64_t chunk = WeightChunk(ctx, panels, panel_bytes);
    ParallelChunks(ctx, panels, chunk, [&](int64_t begin, int64_t end, int) {
      LinearArgs piece = args;
      piece.m_begin = 0;
      piece.m_end = rows;
      piece.panel_begin = begin;
      piece.panel_end = end;
      piece.scratch = ThreadScratch(ScratchSlot::kLinearWeights, kLinearScratchFloats);
      kernels.linear(piece);
    });
    return;
  }
  // A grid of row pieces x panel pieces, one cell per thread. Any split
  // gives the same numbers; this one keeps each thread's weights apart.
  const int64_t panel_pieces = std::clamp<int64_t>(panels / kMinPanelsPerThread, 1, threads);
  const int64_t row_pieces =
      std::max<int64_t>(1, std::min(threads / panel_pieces, (rows + kRowTile - 1) / kRowTile));
  const int64_t row_tiles = (rows + kRowTile - 1) / kRowTile;

  ParallelRanges(ctx, row_pieces * panel_pieces, 1, [&](int64_t begin, int64_t end, int) {
    float* scratch = ThreadScratch(ScratchSlot::kLinearWeights, kLinearScratchFloats);
    for (int64_t cell = begin; cell < end; ++cell) {
      const IndexRange tiles = ThreadPool::StaticRange(row_tiles, static_cast<int>(row_pieces),
                                                       static_cast<int>(cell / panel_pieces));
      const IndexRange panel_range = ThreadPool::StaticRange(panels, static_cast<int>(panel_pieces),
                                                             static_cast<int>(cell % panel_pieces));
      LinearArgs piece = args;
      piece.m_begin = tiles.begin * kRowTile;
      piece.m_end = std::min(rows, tiles.end * kRowTile);
      piece.panel_begin = panel_range.begin;
      piece.panel_end = panel_range.end;
      piece.scratch = scratch;
      if (piece.m_begin < piece.m_end && piece.panel_begin < piece.panel_end) kernels.linear(piece);
    }
  });
}

void LinearBf16Input(const KernelContext& ctx, int64_t rows, const uint16_t* x, int64_t ldx,
                     const PackedWeight& w, const float* bias, float* y, int64_t ldy) {
  if (rows <= 0 || w.empty()) return;
  const int64_t k = w.cols();
  float* converted = ThreadScratch(ScratchSlot::kLinearInput, rows * k);
  const KernelTable& kernels = KernelsFor(ctx.isa);
  ParallelRanges(ctx, rows, std::max<int64_t>(1, 16384 / k), [&](int64_t begin, int64_t end, int) {
    ConvertArgs c{x + begin * ldx, ldx, converted + begin * k, k, end - begin, k};
    kernels.bf16_to_f32(c);
  });
  Linear(ctx, rows, converted, k, w, bias, y, ldy);
}

}  // namespace kiln::cpu
