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
// panels in a cell of that split.
constexpr int64_t kManyRows = 16;
constexpr int64_t kMinPanelsPerCell = 4;  // 64 output columns
constexpr int64_t kRowTile = 6;
constexpr int64_t kMinPanelsPerChunk = 4;

}  // namespace

void Linear(const KernelContext& ctx, int64_t rows, const float* x, int64_t ldx, const PackedWeight& w,
            const float* bias, float* y, int64_t ldy) {
  if (rows <= 0 || w.empty()) return;
  const KernelTable& kernels = KernelsFor(ctx.isa);
  const int64_t panels = w.panels();
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
    // At least 4 panels a chunk: a lone panel is one FMA chain per row,
    // which waits on the FMA latency at every k (the down projection's
    // 155 KB panels would otherwise go one at a time).
    const int64_t chunk = std::max<int64_t>(WeightChunk(ctx, panels, panel_bytes), kMinPanelsPerChunk);
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
  ParallelGrid(ctx, rows, kRowTile, panels, kMinPanelsPerCell,
               [&](int64_t row_begin, int64_t row_end, int64_t panel_begin, int64_t panel_end, int) {
                 LinearArgs piece = args;
                 piece.m_begin = row_begin;
                 piece.m_end = row_end;
                 piece.panel_begin = panel_begin;
                 piece.panel_end = panel_end;
                 piece.scratch = ThreadScratch(ScratchSlot::kLinearWeights, kLinearScratchFloats);
                 kernels.linear(piece);
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
