// The AVX-512 loop of kiln's dense 3x3 convolution on nchw16c activations
// (conv_nchw16c.h, kDense3x3), ResNet's layers. Tiles of one row read the
// input itself where at most the edge pixels' outer taps fall in the
// padding (those taps skipped, kernel rows outside the image too); the
// others read a zero-padded copy of it, so that no tap is ever checked
// against the image's borders. Per register tile of NB (2, or 1 for the last of
// an odd count) blocks of 16 output channels x P output pixels, up to 2 x
// 14 accumulators (of one row on wide images, of two whole rows on images 7
// or fewer pixels wide), through every input channel block: each input
// value is broadcast against the NB packed weight vectors of its channel,
// so that a tap costs NB loads and P broadcasts for NB x P FMAs, and the
// sums stay in registers until the tile is finished. The threads split
// (output block group x band of rows) in contiguous runs, group first
// where a group's weights would otherwise leave L2 (a thread keeps them
// hot across its rows), band first where all groups' weights fit there;
// both threads have work on a 7x7 image; a thread done with its run takes
// the rest of the others' task by task.
// GCC 12 flags the vector intrinsics' own undefined-value idiom (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c_finish_avx512.h"
#include "backend/cpu/tensor_kernels/stealing_tasks.h"
#include "core/cpu_info.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlock = 16;
constexpr int64_t kTaps = 9;
constexpr int kMaxPixels = 14;                       // 2 x 14 accumulators + 2 weights + 1 broadcast
constexpr int kPairRowPixels = kMaxPixels / 2;       // rows this narrow are tiled two at a time
constexpr int64_t kTilesPerBand = 4;                 // register tiles a task runs (at least)
constexpr int64_t kL2GroupWeightBytes = 256 * 1024;  // a group's weights above this: all rows a task
constexpr int64_t kL2AllWeightBytes = 384 * 1024;    // all groups' weights up to this: band by band
constexpr int64_t kFillRows = 8;                     // padded rows per task of the input copy
constexpr int kFetchTapsAhead = 4;                   // weights prefetched this many taps ahead

// The zero-padded input: per image and input block, the rows and columns
// the tiles read (input row r at padded row r + pad_begin), no borders left.
struct PaddedInput {
  int64_t rows = 0, cols = 0;
  int64_t Plane() const { return rows * cols * kBlock; }
};

PaddedInput PaddedInputOf(const Window3& g) {
  PaddedInput p;
  p.rows = (g.out[1] - 1) * g.stride[1] + 3;
  p.cols = (g.out[2] - 1) * g.stride[2] + 3;
  return p;
}

// Copies padded rows [begin, end) (counted over every image and input
// block) of x into the padded buffer; the input's padding lanes become zero
// there whatever they held.
void FillPaddedRows(const BlockedConvPlan& p, const PaddedInput& pad, const float* x, float* padded,
                    int64_t begin, int64_t end) {
  const Window3& g = p.g;
  const int64_t ih = g.in[1], iw = g.in[2], top = g.pad_begin[1], left = g.pad_begin[2];
  const int64_t tail = g.in_channels - (p.in_blocks - 1) * kBlock;
  const __mmask16 tail_lanes = static_cast<__mmask16>(tail >= kBlock ? 0xFFFF : (1u << tail) - 1u);
  // Input columns [c0, c1) land at padded columns [c0 + left, c1 + left).
  const int64_t c0 = std::max<int64_t>(0, -left), c1 = std::min<int64_t>(iw, pad.cols - left);
  for (int64_t at = begin; at < end; ++at) {
    const int64_t row = at % pad.rows, plane = at / pad.rows;  // plane: n * in_blocks + cb
    const int64_t yy = row - top;
    float* dst = padded + at * pad.cols * kBlock;
    if (yy < 0 || yy >= ih || c1 <= c0) {
      std::memset(dst, 0, sizeof(float) * static_cast<size_t>(pad.cols * kBlock));
      continue;
    }
    const __mmask16 lanes = plane % p.in_blocks == p.in_blocks - 1 ? tail_lanes : 0xFFFF;
    const float* src = x + (plane * ih + yy) * iw * kBlock;
    for (int64_t col = 0; col < pad.cols; ++col) {
      const int64_t xx = col - left;
      const __m512 v =
          xx >= c0 && xx < c1 ? _mm512_maskz_loadu_ps(lanes, src + xx * kBlock) : _mm512_setzero_ps();
      _mm512_storeu_ps(dst + col * kBlock, v);
    }
  }
}

struct DenseTile {
  const BlockedConvPlan* plan;
  const float* x;         // the image's first input block (padded or not)
  int64_t x_row;          // floats between input rows
  int64_t x_next_row;     // floats between the windows of two output rows
  int64_t x_block;        // floats between input blocks
  int64_t top, left;      // the window's first row and column in x (-1: in the padding)
  int a0 = 0, a1 = 3;     // kernel rows inside the image
  bool skip_left = false;   // the first pixel's left tap is in the padding
  bool skip_right = false;  // the last pixel's right tap is
  bool fetch_weights = false;  // a task's first one-row tile: prefetch its weights ahead
  const char* fetch_next = nullptr;  // the next task's weights: lines this tile fetches into L2
  int64_t fetch_next_lines = 0;
  const float* w;           // packed weights of the tile's first output block
  const float* bias;        // of the first output block
  const float* residual;    // at the tile's first output pixel (null: none)
  float* y;                 // the tile's first output pixel, first output block
  int64_t y_block;          // floats between output blocks
  __mmask16 keep[2];
};

// Read in place of a tap's input in the padding.
alignas(64) constexpr float kZeroBlock[kBlock] = {};

// NB output blocks x P pixels, column stride S, every input block's
// products added in registers, then finished into y. The pixels are rows of
// W (P / W of them, 1 or 2), whole rows when there are two, so that they are
// contiguous in y. A one-row tile reads the unpadded input where told: its
// kernel rows [a0, a1) only, and the edge pixels' taps in the left or right
// padding from zeros (the first and last pixels have pointers of their own,
// so that one loop serves every tap).
template <int NB, int P, int S, int W = P>
void RunDenseTile(const DenseTile& t) {
  static_assert(P == W || P == 2 * W, "a tile holds one row or two");
  const BlockedConvPlan& p = *t.plan;
  const int64_t w_block = p.in_blocks * kTaps * kBlock * kBlock;
  // The loops over the P pixels carry no unroll pragma: GCC unrolls them
  // whole by itself, and with `unroll 14` it kept part of the sums of every
  // tile narrower than 14 pixels on the stack (1.6x the time for 8-13).
  __m512 acc[NB][P];
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
    for (int q = 0; q < P; ++q) acc[j][q] = _mm512_setzero_ps();
  }
  // The next task's lines, spread evenly over this tile's taps.
  const int64_t steps = p.in_blocks * (t.a1 - t.a0) * 3;
  const int64_t next_per_step = (t.fetch_next_lines + steps - 1) / std::max<int64_t>(steps, 1);
  const char* next = t.fetch_next;
  const char* const next_end = next + t.fetch_next_lines * 64;
  // Every input block, each one's taps in order, into the registers: no
  // partial sums go through memory between input blocks.
#pragma GCC unroll 1
  for (int64_t cb = 0; cb < p.in_blocks; ++cb) {
    const float* w = t.w + cb * kTaps * kBlock * kBlock;
#pragma GCC unroll 1
    for (int a = t.a0; a < t.a1; ++a) {
#pragma GCC unroll 1
      for (int b = 0; b < 3; ++b) {
        for (int64_t line = 0; line < next_per_step && next < next_end; ++line, next += 64)
          _mm_prefetch(next, _MM_HINT_T1);
        // The tap's input for pixel 0 is at column left + b (-1 only where
        // skipped), for pixel q at left + q S + b; a pair's second row
        // x_next_row further.
        const int64_t at = cb * t.x_block + (t.top + a) * t.x_row + (t.left + b) * kBlock;
        const bool first_out = P == W && b == 0 && t.skip_left;
        const bool last_out = P == W && b == 2 && t.skip_right;
        const float* x0 = first_out || (P == 1 && last_out) ? kZeroBlock : t.x + at;
        const float* xi = P > 1 ? t.x + (at + S * kBlock) : x0;  // pixel 1
        const float* xl = last_out ? kZeroBlock : P > 1 && P == W ? xi + (P - 2) * S * kBlock : xi;
        const float* xj = P == W ? xi : t.x + (at + t.x_next_row);
        const float* wi = w + (a * 3 + b) * kBlock * kBlock;
        // A task's first tile reads its group's weights from memory where
        // they left the caches since the last call (the 14-wide layers'
        // 2.4 MB a layer): the prefetcher alone leaves its FMAs waiting.
        // ResNet-18: 0.98x the time; paired-row tiles (the 7-wide layers)
        // took longer with it.
        if (P == W && t.fetch_weights) {
          const char* ahead = reinterpret_cast<const char*>(wi + kFetchTapsAhead * kBlock * kBlock);
#pragma GCC unroll 2
          for (int j = 0; j < NB; ++j) {
#pragma GCC unroll 16
            for (int line = 0; line < kBlock * kBlock * 4 / 64; ++line)
              _mm_prefetch(ahead + j * w_block * 4 + line * 64, _MM_HINT_T0);
          }
        }
        // One input channel a step, not unrolled: unrolled, GCC hoists the
        // broadcasts of several steps and spills the accumulators for them.
        // The empty asm hides the pointers' values from it for the same reason.
#pragma GCC unroll 1
        for (int i = 0; i < kBlock; i += 2, x0 += 2, xi += 2, xl += 2, xj += 2, wi += 2 * kBlock) {
#pragma GCC unroll 2
          for (int u = 0; u < 2; ++u) {
            if constexpr (P == W) {
              asm("" : "+r"(x0), "+r"(xi), "+r"(xl), "+r"(wi));
            } else {
              asm("" : "+r"(x0), "+r"(xi), "+r"(xj), "+r"(wi));
            }
            __m512 wv[NB];
#pragma GCC unroll 2
            for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_ps(wi + u * kBlock + j * w_block);
            for (int q = 0; q < P; ++q) {
              float v;
              if constexpr (P == W) {
                v = q == 0 ? x0[u] : q == P - 1 ? xl[u] : xi[u + (q - 1) * S * kBlock];
              } else {
                v = q == 0 ? x0[u] : q < W ? xi[u + (q - 1) * S * kBlock] : xj[u + (q - W) * S * kBlock];
              }
              const __m512 xv = _mm512_set1_ps(v);
#pragma GCC unroll 2
              for (int j = 0; j < NB; ++j) acc[j][q] = _mm512_fmadd_ps(xv, wv[j], acc[j][q]);
            }
          }
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
    const __m512 bias = _mm512_loadu_ps(t.bias + j * kBlock);
    for (int q = 0; q < P; ++q) {
      const int64_t at = j * t.y_block + q * kBlock;
      const float* r = t.residual != nullptr ? t.residual + at : nullptr;
      _mm512_storeu_ps(t.y + at, FinishBlockedVector(p, acc[j][q], bias, r, t.keep[j]));
    }
  }
}

using DenseTileFn = void (*)(const DenseTile&);

template <int NB, int S, int Rows, int... W>
constexpr std::array<DenseTileFn, sizeof...(W)> DenseTileTable(std::integer_sequence<int, W...>) {
  return {&RunDenseTile<NB, Rows*(W + 1), S, W + 1>...};
}

// Tiles of Rows rows (1 or 2) of W pixels: indexed [NB - 1][W - 1]; NB is 1
// or 2.
template <int S, int Rows>
const auto& DenseTiles() {
  constexpr int kWidths = kMaxPixels / Rows;
  static constexpr std::array<std::array<DenseTileFn, kWidths>, 2> table = {
      DenseTileTable<1, S, Rows>(std::make_integer_sequence<int, kWidths>()),
      DenseTileTable<2, S, Rows>(std::make_integer_sequence<int, kWidths>())};
  return table;
}

// Output blocks go in groups of 2, the last alone when their count is odd.
constexpr int64_t kGroupBlocks = 2;

// Whether the one-row tiles read x itself, without the padded copy: whole
// input blocks (no padding lanes to clear) and at most the first pixel's
// left tap and the last pixel's right tap in the padding. Any rows: a tile
// runs only its kernel rows inside the image. Without the copy ResNet-18's
// 56-, 28- and 14-wide layers took 0.82-0.90x the time (copy included) on a
// Zen 5 EPYC, 2 threads, and the whole model 0.97x (bench/RESULTS.md).
bool ReadsUnpaddedInput(const BlockedConvPlan& p) {
  const Window3& g = p.g;
  const int64_t iw = g.in[2], ow = g.out[2], s = g.stride[2], left = g.pad_begin[2];
  if (g.in_channels % kBlock != 0 || ow <= kPairRowPixels || left < 0 || left > 1) return false;
  // The last pixel's right tap at most one column past the image, the one
  // before it inside.
  return (ow - 1) * s - left + 2 <= iw && (ow - 2) * s - left + 2 <= iw - 1;
}

}  // namespace

int64_t BlockedDense3x3PaddedFloats(const BlockedConvPlan& plan) {
  if (ReadsUnpaddedInput(plan)) return 0;
  return plan.g.batch * plan.in_blocks * PaddedInputOf(plan.g).Plane();
}

void RunBlockedDense3x3Avx512(const BlockedConvPlan& p, const float* x, const float* residual, float* y,
                              ThreadPool* pool, float* padded) {
  const Window3& g = p.g;
  const PaddedInput pad = PaddedInputOf(g);
  const bool unpadded = ReadsUnpaddedInput(p);
  std::vector<float> own;
  if (!unpadded) {
    if (padded == nullptr) {
      own.resize(static_cast<size_t>(BlockedDense3x3PaddedFloats(p)));
      padded = own.data();
    }
    const int64_t padded_rows = g.batch * p.in_blocks * pad.rows;
    // In chunks of kFillRows padded rows, stolen as the convolution's tasks are.
    const int64_t fill_tasks = (padded_rows + kFillRows - 1) / kFillRows;
    auto fill = [&](int64_t begin, int64_t end, int) {
      FillPaddedRows(p, pad, x, padded, begin * kFillRows, std::min(padded_rows, end * kFillRows));
    };
    if (pool == nullptr || pool->num_threads() == 1) {
      fill(0, fill_tasks, 0);
    } else {
      RunStealingTasks(*pool, fill_tasks, fill);
    }
  }
  // The tiles' view of the input: x itself, or the padded copy (no borders left).
  const float* in = unpadded ? x : padded;
  const int64_t in_rows = unpadded ? g.in[1] : pad.rows, in_cols = unpadded ? g.in[2] : pad.cols;
  const int64_t top_pad = unpadded ? g.pad_begin[1] : 0, left_pad = unpadded ? g.pad_begin[2] : 0;
  const int64_t in_plane = in_rows * in_cols * kBlock;

  const int64_t oh = g.out[1], ow = g.out[2], stride = g.stride[2];
  // Rows 7 or fewer pixels wide take two a tile; the others tiles of
  // near-equal width (28 = 14 + 14, 56 = 4 x 14, 10 = 10).
  const bool pair_rows = ow <= kPairRowPixels;
  const int64_t groups = (p.out_blocks + kGroupBlocks - 1) / kGroupBlocks;
  const int64_t tiles = (ow + kMaxPixels - 1) / kMaxPixels;
  const auto& table = stride == 1 ? DenseTiles<1, 1>() : DenseTiles<2, 1>();
  const auto& pair_table = stride == 1 ? DenseTiles<1, 2>() : DenseTiles<2, 2>();
  const int64_t out_plane = oh * ow * kBlock;
  // A task: one group of output blocks over a band of rows, each tile
  // through every input block with its sums in registers; the group's
  // weights (9 KB an output block and input block) come from L2. A group
  // whose weights would not stay in L2 from one band to the next takes all
  // rows at once, so that they are read from memory once a call. Where all
  // groups' weights fit in L2 together, a thread's run of tasks goes band
  // by band, each band through every group, so that the input rows a band
  // reads are fetched once for all groups rather than once a group
  // (ResNet's 56-wide layers: 0.95x, and the 3x3/2 from them 0.85x, of the
  // time group by group, which read the whole 0.9 MB input once a group).
  const int64_t block_weight_bytes =
      p.in_blocks * kTaps * kBlock * kBlock * static_cast<int64_t>(sizeof(float));
  const int64_t group_weight_bytes = kGroupBlocks * block_weight_bytes;
  const int64_t band = group_weight_bytes > kL2GroupWeightBytes
                           ? oh
                           : std::clamp<int64_t>((kTilesPerBand + tiles - 1) / tiles, 1, oh);
  const int64_t bands = (oh + band - 1) / band;
  const bool band_major = groups * group_weight_bytes <= kL2AllWeightBytes;
  const int64_t tasks = g.batch * groups * bands;
  // Where a task takes all rows of one group, whose weights come from
  // memory (the 14- and 7-wide layers' 2.4 and 9.4 MB), a task fetches the
  // next group's into L2 while it computes, if both groups fit there
  // together: ResNet-18's 7-wide layers took 1.00-1.17 ms in the model
  // without, 0.85-0.93 with, on an Intel Xeon with 2 MB of L2
  // (bench/RESULTS.md).
  const int64_t l2_bytes = GetCpuInfo().l2_cache_bytes;
  const bool fetch_next =
      group_weight_bytes > kL2GroupWeightBytes && 2 * group_weight_bytes <= l2_bytes * 3 / 4;
  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t band_index = band_major ? task / groups % bands : task % bands;
      const int64_t group_index = band_major ? task % groups : task / bands % groups;
      const int64_t row0 = band_index * band, row1 = std::min(oh, row0 + band);
      const int64_t ob = group_index * kGroupBlocks;
      const int64_t n = task / bands / groups;
      const int nb = static_cast<int>(std::min(kGroupBlocks, p.out_blocks - ob));
      DenseTile t;
      t.plan = &p;
      t.x = in + n * p.in_blocks * in_plane;
      t.x_row = in_cols * kBlock;
      t.x_next_row = g.stride[1] * t.x_row;
      t.x_block = in_plane;
      t.w = p.weights.data() + ob * p.in_blocks * kTaps * kBlock * kBlock;
      t.bias = p.bias.data() + ob * kBlock;
      t.y_block = out_plane;
      for (int j = 0; j < nb; ++j) t.keep[j] = BlockedKeepMask(p, ob + j);
      const auto& fns = table[static_cast<size_t>(nb - 1)];
      t.fetch_weights = true;
      // The next group's weights (a task is one group's rows here), fetched
      // into L2 a slice a tile over this task's tiles.
      const char* next_w = nullptr;
      int64_t next_lines = 0;
      if (fetch_next && task + 1 < tasks && (task + 1) % groups != 0) {
        const int64_t next_ob = ob + kGroupBlocks;
        next_w =
            reinterpret_cast<const char*>(p.weights.data() + next_ob * p.in_blocks * kTaps * kBlock * kBlock);
        next_lines = std::min(kGroupBlocks, p.out_blocks - next_ob) * block_weight_bytes / 64;
      }
      const int64_t calls = pair_rows ? (row1 - row0 + 1) / 2 : (row1 - row0) * tiles;
      int64_t call = 0;
      auto slice = [&]() {
        const int64_t from = call * next_lines / calls, to = (call + 1) * next_lines / calls;
        t.fetch_next = next_w != nullptr ? next_w + from * 64 : nullptr;
        t.fetch_next_lines = to - from;
        ++call;
      };
      for (int64_t row = row0; row < row1; ++row) {
        t.top = row * g.stride[1] - top_pad;
        t.a0 = static_cast<int>(std::clamp<int64_t>(-t.top, 0, 3));
        t.a1 = static_cast<int>(std::clamp<int64_t>(in_rows - t.top, t.a0, 3));
        if (pair_rows && row + 1 < row1) {  // rows row and row + 1 in one tile (padded input only)
          t.left = 0;
          const int64_t y_at = (n * p.out_blocks + ob) * out_plane + row * ow * kBlock;
          t.residual = residual != nullptr ? residual + y_at : nullptr;
          t.y = y + y_at;
          slice();
          pair_table[static_cast<size_t>(nb - 1)][static_cast<size_t>(ow - 1)](t);
          t.fetch_weights = false;
          ++row;
          continue;
        }
        for (int64_t tile = 0; tile < tiles; ++tile) {
          const int64_t col = tile * ow / tiles, width = (tile + 1) * ow / tiles - col;
          t.left = col * stride - left_pad;
          t.skip_left = t.left < 0;
          t.skip_right = t.left + (width - 1) * stride + 2 >= in_cols;
          const int64_t y_at = (n * p.out_blocks + ob) * out_plane + (row * ow + col) * kBlock;
          t.residual = residual != nullptr ? residual + y_at : nullptr;
          t.y = y + y_at;
          slice();
          fns[static_cast<size_t>(width - 1)](t);
          t.fetch_weights = false;
        }
      }
    }
  };
  if (pool == nullptr || pool->num_threads() == 1) {
    body(0, tasks, 0);
  } else {
    RunStealingTasks(*pool, tasks, body);
  }
}

}  // namespace kiln::cpu
