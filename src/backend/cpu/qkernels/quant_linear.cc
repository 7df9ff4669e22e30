// Splitting the quantized linear layer over threads: activation rows first
// (quantized once), then a grid of row pieces x weight row-group chunks.
#include "backend/cpu/qkernels/quant_linear.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/amx.h"
#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/qkernels/quant_gemm_amx.h"

namespace kiln::cpu {
namespace {

// As the float linear: from this many rows, threads split rows as well as
// weight row groups; a cell of that split has at least this many groups.
constexpr int64_t kManyRows = 16;
constexpr int64_t kMinGroupsPerCell = 8;  // 64 output columns
constexpr int64_t kRowTile = 4;
// The AMX kernel's cells: row tiles of 16, at least two strips of a pair
// of row groups each.
constexpr int64_t kAmxRowTile = 16;
constexpr int64_t kAmxMinPairsPerCell = 2;
// QuantLinearPairedChunks' chunks: 64 output columns of each weight (an
// even number of row groups, so that no x8 pair is split), whose products
// for 512 rows take 256 KiB, well inside a core's L2.
constexpr int64_t kPairedChunkGroups = 8;

size_t Align64(size_t n) { return (n + 63) / 64 * 64; }

// Whether `rows` rows are many enough for the AMX kernel under ctx and the
// CPU has its tiles; the weights decide the rest (RunsOnAmx).
bool AmxTakes(const KernelContext& ctx, int64_t rows) {
  return rows >= kManyRows && ctx.isa == Isa::kAvx512 && AmxInt8Usable();
}

// Blocks [b_begin, b_end) of rows [begin, end) of x into its block-by-block
// copy (a lone row's values and scales are their own copy: only its sums
// are written).
void CopyByBlock(const QuantizedRows& x, int64_t begin, int64_t end, int64_t b_begin, int64_t b_end) {
  // Plain locals: stores through int8_t* may alias anything, and through
  // the struct every field was read again for every block.
  const int64_t k = x.k, blocks = k / 32, h = x.by_block_rows;
  const bool aliased = x.by_block == x.q;
  for (int64_t m = begin; m < end; ++m) {
    const int64_t first = ((m / h) * blocks + b_begin) * h + m % h;
    const int8_t* q = x.q + m * k + 32 * b_begin;
    const float* d = x.d + m * blocks + b_begin;
    const int16_t* sums = x.sums + m * (k / 16) + 2 * b_begin;
    int8_t* to_q = x.by_block + 32 * first;
    float* to_d = x.by_block_d + first;
    int32_t* to_neg_sum = x.by_block_neg_sum + first;
    for (int64_t b = 0; b < b_end - b_begin; ++b) {
      if (!aliased) {
        std::memcpy(to_q + 32 * h * b, q + 32 * b, 32);
        to_d[h * b] = d[b];
      }
      to_neg_sum[h * b] = -(static_cast<int32_t>(sums[2 * b]) + sums[2 * b + 1]);
    }
  }
}

// How QuantizeActivations shares its work among threads: units of one row
// tile (tile_rows rows, whose values the AMX and by-block layouts
// interleave) by one run of chunk_blocks blocks. Threads take whole units,
// so two of them write the same cache line only at a unit's edge: split by
// rows, two threads filled alternate 4- and 32-byte pieces of the same
// lines, and two threads quantized 5 or 16 rows slower than one did. Few
// rows are split along the blocks too, in runs of whole lines of scales
// and sums (512 values), none under kMinUnitValues values (below that,
// waking the other thread cost more than the half it took); so are the
// units a thread takes at least (many rows of a tiny model stay on one).
constexpr int64_t kMinUnitValues = 8192;

struct QuantizeSplit {
  int64_t tile_rows = 1, tiles = 1;
  int64_t chunk_blocks = 1, chunks = 1;
  int64_t min_units_per_thread = 1;
};

QuantizeSplit SplitQuantize(const KernelContext& ctx, int64_t rows, int64_t k, int block, int64_t tile_rows) {
  QuantizeSplit s;
  const int64_t blocks = k / block;
  s.tile_rows = std::max<int64_t>(tile_rows, 1);
  s.tiles = (rows + s.tile_rows - 1) / s.tile_rows;
  s.chunk_blocks = blocks;
  const int64_t threads = ctx.num_threads();
  const int64_t tile_values = std::min(rows, s.tile_rows) * k;
  if (s.tiles < threads && blocks > 0) {
    const int64_t line_blocks = std::max<int64_t>(512 / block, 1);
    const int64_t chunks = std::min((threads + s.tiles - 1) / s.tiles, tile_values / kMinUnitValues);
    if (chunks > 1) {
      s.chunk_blocks = ((blocks + chunks - 1) / chunks + line_blocks - 1) / line_blocks * line_blocks;
      s.chunks = (blocks + s.chunk_blocks - 1) / s.chunk_blocks;
    }
  }
  const int64_t unit_values = std::max<int64_t>(std::min(rows, s.tile_rows) * s.chunk_blocks * block, 1);
  s.min_units_per_thread = std::max<int64_t>(kMinUnitValues / unit_values, 1);
  return s;
}

}  // namespace

bool AmxQuantGemmRuns(DType w_type, bool has_x8) {
  // The tiles take every format with an x8 copy.
  return has_x8 && HasX8Layout(w_type) && AmxInt8Usable();
}

QuantizedRows QuantizeActivations(const KernelContext& ctx, int64_t rows, const void* x, bool bf16, int64_t ldx,
                                  int64_t k, int block) {
  // Many rows also give the AMX kernel its scales (and sums).
  const bool amx = AmxTakes(ctx, rows);
  const int64_t tile_rows = amx ? (rows + kAmxRowTile - 1) / kAmxRowTile * kAmxRowTile : 0;
  const size_t q_bytes = Align64(static_cast<size_t>(rows * k));
  const size_t d_bytes = Align64(static_cast<size_t>(rows * (k / block)) * sizeof(float));
  const size_t sum_bytes = Align64(static_cast<size_t>(rows * (k / 16)) * sizeof(int16_t));
  // tile_d, then tile_s or tile_pairs (k / 32 or k / 64 per row).
  const size_t tile_scale_bytes = Align64(static_cast<size_t>(tile_rows * (k / block)) * sizeof(float));
  const size_t tile_d_bytes =
      tile_scale_bytes + Align64(static_cast<size_t>(tile_rows * (k / 32)) * sizeof(float));
  // Rows for the vector kernels also come block by block (qkernel_table.h),
  // in tiles of by_block_rows rows, the last padded. One row's blocks are
  // already in that order, so only its negated sums are new.
  const bool by_block = block == 32 && rows >= 1 && !amx;
  const bool one_row = rows == 1;
  const int64_t by_block_rows = rows < kByBlockTileRows ? rows : kByBlockTileRows;
  const int64_t padded_rows = by_block ? (rows + by_block_rows - 1) / by_block_rows * by_block_rows : 0;
  const size_t by_block_q_bytes = one_row ? 0 : Align64(static_cast<size_t>(padded_rows * k));
  const size_t by_block_d_bytes =
      one_row ? 0 : Align64(static_cast<size_t>(padded_rows * (k / 32)) * sizeof(float));
  const size_t neg_sum_bytes = Align64(static_cast<size_t>(padded_rows * (k / 32)) * sizeof(int32_t));
  const size_t by_block_bytes = by_block ? by_block_q_bytes + by_block_d_bytes + neg_sum_bytes : 0;
  const auto floats =
      static_cast<int64_t>((q_bytes + d_bytes + sum_bytes + tile_d_bytes + by_block_bytes) / sizeof(float));
  auto* base = reinterpret_cast<uint8_t*>(ThreadScratch(ScratchSlot::kLinearInput, std::max<int64_t>(floats, 16)));
  QuantizedRows out;
  out.q = reinterpret_cast<int8_t*>(base);
  out.d = reinterpret_cast<float*>(base + q_bytes);
  out.sums = reinterpret_cast<int16_t*>(base + q_bytes + d_bytes);
  out.k = k;
  out.block = block;
  out.rows = rows;
  if (amx) {
    out.tile_d = reinterpret_cast<float*>(base + q_bytes + d_bytes + sum_bytes);
    uint8_t* sums_at = base + q_bytes + d_bytes + sum_bytes + tile_scale_bytes;
    if (block == 32) {
      out.tile_s = reinterpret_cast<float*>(sums_at);
    } else {
      out.tile_pairs = reinterpret_cast<int32_t*>(sums_at);
    }
  }
  if (by_block) {
    uint8_t* at = base + q_bytes + d_bytes + sum_bytes + tile_d_bytes;
    out.by_block = one_row ? out.q : reinterpret_cast<int8_t*>(at);
    out.by_block_d = one_row ? out.d : reinterpret_cast<float*>(at + by_block_q_bytes);
    out.by_block_neg_sum = reinterpret_cast<int32_t*>(at + by_block_q_bytes + by_block_d_bytes);
    out.by_block_rows = by_block_rows;
  }
  if (rows <= 0) return out;
  const QuantKernelTable& kernels = QuantKernelsFor(ctx.isa);
  const QuantizeSplit split = SplitQuantize(ctx, rows, k, block, by_block ? by_block_rows : kAmxRowTile);
  ParallelRanges(ctx, split.tiles * split.chunks, split.min_units_per_thread,
                 [&](int64_t begin, int64_t end, int) {
                   for (int64_t unit = begin; unit < end; ++unit) {
                     const int64_t m_begin = unit / split.chunks * split.tile_rows;
                     const int64_t m_end = std::min(rows, m_begin + split.tile_rows);
                     const int64_t b_begin = unit % split.chunks * split.chunk_blocks;
                     const int64_t b_end = std::min(k / block, b_begin + split.chunk_blocks);
                     QuantizeRowsArgs args{x, bf16, ldx, m_begin, m_end, b_begin, b_end, out};
                     kernels.quantize_rows(args);
                     if (amx) AmxTileScales(out, rows, m_begin, m_end, b_begin, b_end);
                     if (by_block) CopyByBlock(out, m_begin, m_end, b_begin, b_end);
                   }
                 });
  return out;
}

namespace {

// The kernel arguments for all activation rows and row groups of w.
QuantGemmArgs ArgsFor(const QuantMatrix& w, const QuantizedRows& x, const float* bias, float* y, int64_t ldy) {
  QuantGemmArgs args{};
  args.w_type = w.dtype();
  args.w = w.data();
  args.row_bytes = w.row_bytes();
  args.x8 = w.x8();
  args.x8_pair_bytes = args.x8 != nullptr ? X8PairBytes(w.dtype(), w.cols()) : 0;
  args.n_total = w.rows();
  args.k = w.cols();
  args.x = &x;
  args.bias = bias;
  args.y = y;
  args.ldy = ldy;
  return args;
}

// ArgsFor the output columns of w from row group g0 on (even, so that the
// x8 pairs stay whole), as if they were a matrix of their own: its row
// group 0 is w's g0, and its output column 0 lands at y.
QuantGemmArgs ArgsForColumnsFrom(const QuantMatrix& w, int64_t g0, const QuantizedRows& x, float* y,
                                 int64_t ldy) {
  QuantGemmArgs args = ArgsFor(w, x, nullptr, y, ldy);
  const int64_t n0 = g0 * kQuantGroupRows;
  args.w += n0 * args.row_bytes;
  if (args.x8 != nullptr) args.x8 += g0 / 2 * args.x8_pair_bytes;
  args.n_total -= n0;
  return args;
}

// Row groups per chunk of a decoding pass: WeightChunk's, but at least 4,
// the groups the vector kernels read side by side (the down projection's
// groups are 22-41 KB, and two or three a chunk went one at a time), and
// even, so that no pair of the x8 layout, whose lines both groups share,
// is split between threads.
int64_t DecodeChunk(const KernelContext& ctx, int64_t groups, int64_t group_bytes) {
  const int64_t chunk = std::max<int64_t>(WeightChunk(ctx, groups, group_bytes), 4);
  return (chunk + 1) / 2 * 2;
}

int64_t GroupsOf(const QuantMatrix& w) { return (w.rows() + kQuantGroupRows - 1) / kQuantGroupRows; }

int64_t PairsOf(const QuantMatrix& w) { return (GroupsOf(w) + 1) / 2; }

// For the parts' units (row groups or pairs, `units_of` each) laid end to
// end, calls body(j, begin, end) with each part j's own share of the joint
// range [begin, end), where it has one.
template <class Part, class UnitsOf, class Body>
void ForEachPartIn(const Part* parts, int count, int64_t begin, int64_t end, UnitsOf units_of,
                   Body body) {
  int64_t first = 0;  // the part's first unit in the joint range
  for (int j = 0; j < count && first < end; ++j) {
    const int64_t units = units_of(*parts[j].w);
    const int64_t part_begin = std::max(begin, first) - first, part_end = std::min(end, first + units) - first;
    first += units;
    if (part_begin < part_end) body(j, part_begin, part_end);
  }
}

// The AMX kernel on one cell, in the calling thread's scratch.
void AmxCell(const QuantGemmArgs& args) {
  const int64_t bytes = AmxQuantGemmScratchBytes(args.k);
  AmxQuantGemm(args, ThreadScratch(ScratchSlot::kLinearWeights, (bytes + 3) / 4));
}

// The parts on the AMX kernel, their pairs of row groups (the tiles' 16
// columns) as one range split into cells, so that a fused projection costs
// one wait for the threads instead of one per weight.

void AmxLinearParts(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantLinearPart* parts,
                    int count, int64_t ldy) {
  int64_t total = 0;
  for (int j = 0; j < count; ++j) total += PairsOf(*parts[j].w);
  ParallelGrid(ctx, rows, kAmxRowTile, total, kAmxMinPairsPerCell,
               [&](int64_t row_begin, int64_t row_end, int64_t begin, int64_t end, int) {
                 ForEachPartIn(parts, count, begin, end, PairsOf, [&](int j, int64_t p_begin, int64_t p_end) {
                   const QuantMatrix& w = *parts[j].w;
                   QuantGemmArgs args = ArgsFor(w, x, parts[j].bias, parts[j].y, ldy);
                   args.m_begin = row_begin;
                   args.m_end = row_end;
                   args.g_begin = 2 * p_begin;
                   args.g_end = std::min(GroupsOf(w), 2 * p_end);
                   AmxCell(args);
                 });
               });
}

// Whether QuantLinear runs the AMX kernel: many rows only, where the tile
// setup pays off (decoding stays on the vector kernels, which compute the
// same bits), and activations quantized with their tile scales (which
// QuantizeActivations makes under the same conditions).
bool RunsOnAmx(const KernelContext& ctx, int64_t rows, const QuantMatrix& w) {
  return AmxTakes(ctx, rows) && AmxQuantGemmRuns(w.dtype(), w.x8() != nullptr);
}

bool RunsOnAmx(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantMatrix& w) {
  return x.tile_d != nullptr && RunsOnAmx(ctx, rows, w);
}

}  // namespace

const char* QuantLinearKernel(const KernelContext& ctx, int64_t rows, const QuantMatrix& w) {
  return RunsOnAmx(ctx, rows, w) ? "amx-int8" : QuantKernelsFor(ctx.isa).name;
}

void QuantLinear(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantMatrix& w,
                 const float* bias, float* y, int64_t ldy) {
  if (rows <= 0 || w.rows() <= 0) return;
  const QuantKernelTable& kernels = QuantKernelsFor(ctx.isa);
  const int64_t groups = GroupsOf(w);
  if (rows < kManyRows) {
    // Decoding: the weights are the work; threads claim chunks of groups.
    ParallelChunks(ctx, groups, DecodeChunk(ctx, groups, kQuantGroupRows * w.row_bytes()),
                   [&](int64_t begin, int64_t end, int) {
                     QuantGemmArgs args = ArgsFor(w, x, bias, y, ldy);
                     args.m_begin = 0;
                     args.m_end = rows;
                     args.g_begin = begin;
                     args.g_end = end;
                     kernels.gemm(args);
                   });
    return;
  }
  if (RunsOnAmx(ctx, rows, x, w)) {
    const QuantLinearPart part{&w, bias, y};
    AmxLinearParts(ctx, rows, x, &part, 1, ldy);
    return;
  }
  ParallelGrid(ctx, rows, kRowTile, groups, kMinGroupsPerCell,
               [&](int64_t row_begin, int64_t row_end, int64_t g_begin, int64_t g_end, int) {
                 QuantGemmArgs args = ArgsFor(w, x, bias, y, ldy);
                 args.m_begin = row_begin;
                 args.m_end = row_end;
                 args.g_begin = g_begin;
                 args.g_end = g_end;
                 kernels.gemm(args);
               });
}

void QuantLinearParts(const KernelContext& ctx, int64_t rows, const QuantizedRows& x, const QuantLinearPart* parts,
                      int count, int64_t ldy) {
  if (rows <= 0 || count <= 0) return;
  if (rows >= kManyRows) {
    bool amx = true;
    for (int j = 0; j < count; ++j) amx = amx && RunsOnAmx(ctx, rows, x, *parts[j].w);
    if (amx) return AmxLinearParts(ctx, rows, x, parts, count, ldy);
  }
  if (rows >= kManyRows || count == 1) {
    for (int j = 0; j < count; ++j) QuantLinear(ctx, rows, x, *parts[j].w, parts[j].bias, parts[j].y, ldy);
    return;
  }
  // Few rows (decoding): the parts' row groups as one range, claimed in
  // chunks by the threads in one call instead of one call (and one wait)
  // each.
  const QuantKernelTable& kernels = QuantKernelsFor(ctx.isa);
  int64_t total = 0, bytes = 0;
  for (int j = 0; j < count; ++j) {
    total += GroupsOf(*parts[j].w);
    bytes += parts[j].w->rows() * parts[j].w->row_bytes();
  }
  const int64_t group_bytes = bytes / std::max<int64_t>(total, 1);
  ParallelChunks(ctx, total, DecodeChunk(ctx, total, group_bytes), [&](int64_t begin, int64_t end, int) {
    ForEachPartIn(parts, count, begin, end, GroupsOf, [&](int j, int64_t g_begin, int64_t g_end) {
      QuantGemmArgs args = ArgsFor(*parts[j].w, x, parts[j].bias, parts[j].y, ldy);
      args.m_begin = 0;
      args.m_end = rows;
      args.g_begin = g_begin;
      args.g_end = g_end;
      kernels.gemm(args);
    });
  });
}

bool QuantLinearPairedChunks(const KernelContext& ctx, int64_t rows, const QuantizedRows& x,
                             const QuantMatrix& a, const QuantMatrix& b, const PairedChunkFinish& finish) {
  if (rows < kManyRows) return false;
  const int64_t groups = GroupsOf(a);
  const int64_t chunks = (groups + kPairedChunkGroups - 1) / kPairedChunkGroups;
  constexpr int64_t kChunkCols = kPairedChunkGroups * kQuantGroupRows;
  const bool amx = RunsOnAmx(ctx, rows, x, a) && RunsOnAmx(ctx, rows, x, b);
  const QuantKernelTable& kernels = QuantKernelsFor(ctx.isa);
  ParallelChunks(ctx, chunks, 1, [&](int64_t begin, int64_t end, int) {
    // a's columns of the chunk, then b's, side by side in each row.
    float* products = ThreadScratch(ScratchSlot::kLinearOutput, rows * 2 * kChunkCols);
    for (int64_t c = begin; c < end; ++c) {
      const int64_t g0 = c * kPairedChunkGroups;
      const int64_t n0 = g0 * kQuantGroupRows;
      for (int j = 0; j < 2; ++j) {
        QuantGemmArgs args =
            ArgsForColumnsFrom(j == 0 ? a : b, g0, x, products + j * kChunkCols, 2 * kChunkCols);
        args.m_begin = 0;
        args.m_end = rows;
        args.g_begin = 0;
        args.g_end = std::min(kPairedChunkGroups, groups - g0);
        if (amx) {
          AmxCell(args);
        } else {
          kernels.gemm(args);
        }
      }
      finish(n0, std::min(kChunkCols, a.rows() - n0), products, products + kChunkCols, 2 * kChunkCols);
    }
  });
  return true;
}

void QuantLinearJobs(const KernelContext& ctx, const QuantLinearJob* jobs, int count) {
  bool few = true;
  int64_t total = 0, bytes = 0;
  for (int j = 0; j < count; ++j) {
    few = few && jobs[j].rows < kManyRows;
    total += GroupsOf(*jobs[j].w);
    bytes += jobs[j].w->rows() * jobs[j].w->row_bytes();
  }
  if (!few) {
    for (int j = 0; j < count; ++j) {
      QuantLinear(ctx, jobs[j].rows, *jobs[j].x, *jobs[j].w, nullptr, jobs[j].y, jobs[j].ldy);
    }
    return;
  }
  if (total == 0) return;
  const QuantKernelTable& kernels = QuantKernelsFor(ctx.isa);
  const int64_t group_bytes = bytes / total;
  ParallelChunks(ctx, total, DecodeChunk(ctx, total, group_bytes), [&](int64_t begin, int64_t end, int) {
    ForEachPartIn(jobs, count, begin, end, GroupsOf, [&](int j, int64_t g_begin, int64_t g_end) {
      const QuantLinearJob& job = jobs[j];
      if (job.rows <= 0) return;
      QuantGemmArgs args = ArgsFor(*job.w, *job.x, nullptr, job.y, job.ldy);
      args.m_begin = 0;
      args.m_end = job.rows;
      args.g_begin = g_begin;
      args.g_end = g_end;
      kernels.gemm(args);
    });
  });
}

}  // namespace kiln::cpu
