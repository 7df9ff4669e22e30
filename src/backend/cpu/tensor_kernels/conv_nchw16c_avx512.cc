// The AVX-512 loops of kiln's nchw16c convolutions (conv_nchw16c.h).
// Pointwise: a register tile of P output pixels x NB blocks of 16 output
// channels, accumulated over the input channel blocks, each input value
// broadcast against the packed [16 in][16 out] weight vectors; on a 1x1
// image a matrix-vector product. Depthwise: 3x3 and 5x5 up to 16 output
// pixels at a time, each input vector loaded once per kernel row, columns
// outside the image skipped; other kernels per output row, 8 output pixels
// at a time, one vector FMA per tap, tiles that touch the padding checking
// each tap's column. Stem: per output row and pair of blocks of 16 output
// channels, 14 output pixels at a time, each input value (row-major or
// nchw16c) broadcast against the blocks' weight vectors of its tap.
// GCC 12 flags the vector intrinsics' own undefined-value idiom (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/cpu/kernels/simd_avx512.h"
#include "backend/cpu/tensor_kernels/conv2d_simd.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c.h"
#include "backend/cpu/tensor_kernels/conv_nchw16c_finish_avx512.h"
#include "backend/cpu/tensor_kernels/stealing_tasks.h"

namespace kiln::cpu {
namespace {

using S = SimdAvx512;
constexpr int64_t kBlock = 16;
constexpr int kPixels = 12;  // pointwise tile: 2 x 12 accumulators + 2 weights + 1 broadcast
constexpr int kDepthwisePixels = 8;
constexpr int kStemPixels = 14;

// Finish on `count` finished depthwise vectors (acc, y and residual kBlock
// floats apart), the common activations' switch taken once and their code
// inlined (ConvActivate is a call per vector where the compiler does not
// inline it); the others go through FinishBlockedVector. One function for every tile
// shape: the tiles hand their accumulators over through a small buffer.
[[gnu::noinline]] void FinishPixels(const BlockedConvPlan& p, const float* acc, int count, const float* bias_block,
                                    const float* residual, float* y, __mmask16 keep) {
  const FusedEpilogue& e = p.epilogue;
  const __m512 bias = _mm512_loadu_ps(bias_block);
  auto store = [&](auto act) {
    for (int q = 0; q < count; ++q) {
      __m512 v = _mm512_add_ps(_mm512_loadu_ps(acc + q * kBlock), bias);
      if (residual == nullptr) {
        v = act(v);
      } else if (e.residual_before_activation) {
        v = act(_mm512_add_ps(v, _mm512_loadu_ps(residual + q * kBlock)));
      } else {
        v = _mm512_add_ps(act(v), _mm512_loadu_ps(residual + q * kBlock));
      }
      _mm512_storeu_ps(y + q * kBlock, _mm512_maskz_mov_ps(keep, v));
    }
  };
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  switch (e.activation) {
    case FusedActivation::kNone: store([](__m512 v) { return v; }); return;
    case FusedActivation::kRelu: store([&](__m512 v) { return _mm512_max_ps(v, zero); }); return;
    case FusedActivation::kClip: {
      const __m512 lo = _mm512_set1_ps(e.alpha), hi = _mm512_set1_ps(e.beta);
      store([&](__m512 v) { return _mm512_min_ps(_mm512_max_ps(v, lo), hi); });
      return;
    }
    case FusedActivation::kHardSigmoid: {
      const __m512 a = _mm512_set1_ps(e.alpha), b = _mm512_set1_ps(e.beta);
      store([&](__m512 v) { return _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(v, a, b), zero), one); });
      return;
    }
    case FusedActivation::kHardSwish: {
      // As ConvActivate computes it (v / 6 + 1/2), to the bit.
      const __m512 six = _mm512_set1_ps(6.0f), half = _mm512_set1_ps(0.5f);
      store([&](__m512 v) {
        const __m512 gate = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(_mm512_div_ps(v, six), half), zero), one);
        return _mm512_mul_ps(v, gate);
      });
      return;
    }
    default:
      for (int q = 0; q < count; ++q) {
        const float* r = residual != nullptr ? residual + q * kBlock : nullptr;
        _mm512_storeu_ps(y + q * kBlock,
                         FinishBlockedVector(p, _mm512_loadu_ps(acc + q * kBlock), bias, r, keep));
      }
  }
}

struct PointwiseTile {
  const BlockedConvPlan* plan;
  const float* x;         // the tile's first input pixel, channel block 0
  int64_t x_pixel_step;   // floats between the tile's input pixels
  int64_t x_block_step;   // floats between input channel blocks
  const float* w;         // packed weights of the first output block
  const float* bias;      // of the first output block
  const float* residual;  // at the tile's first output pixel (null: none)
  float* y;               // the tile's first output pixel, first output block
  int64_t y_block_step;   // floats between output channel blocks
  __mmask16 keep[2];
};

template <int P, int NB>
void RunPointwiseTile(const PointwiseTile& t) {
  const BlockedConvPlan& p = *t.plan;
  const int64_t w_block_step = p.in_blocks * kBlock * kBlock;
  __m512 acc[NB][P];
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
#pragma GCC unroll 12
    for (int q = 0; q < P; ++q) acc[j][q] = _mm512_setzero_ps();
  }
  // The last input block's padding lanes are zero in x and w: skip them
  // (24 channels: 24 products a pixel, not 32).
  const int tail = static_cast<int>(p.g.in_channels - (p.in_blocks - 1) * kBlock);
  for (int64_t cb = 0; cb < p.in_blocks; ++cb) {
    const float* xb = t.x + cb * t.x_block_step;
    const float* wb = t.w + cb * kBlock * kBlock;
    const int lanes = cb + 1 == p.in_blocks ? tail : static_cast<int>(kBlock);
#pragma GCC unroll 4
    for (int i = 0; i < lanes; ++i) {
      __m512 wv[NB];
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_ps(wb + j * w_block_step + i * kBlock);
#pragma GCC unroll 12
      for (int q = 0; q < P; ++q) {
        const __m512 xv = _mm512_set1_ps(xb[q * t.x_pixel_step + i]);
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) acc[j][q] = _mm512_fmadd_ps(xv, wv[j], acc[j][q]);
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
    const __m512 bias = _mm512_loadu_ps(t.bias + j * kBlock);
    for (int q = 0; q < P; ++q) {
      const int64_t at = j * t.y_block_step + q * kBlock;
      const float* r = t.residual != nullptr ? t.residual + at : nullptr;
      _mm512_storeu_ps(t.y + at, FinishBlockedVector(p, acc[j][q], bias, r, t.keep[j]));
    }
  }
}

using TileFn = void (*)(const PointwiseTile&);

template <int NB, int... P>
constexpr std::array<TileFn, sizeof...(P)> TileTable(std::integer_sequence<int, P...>) {
  return {&RunPointwiseTile<P + 1, NB>...};
}

// A 1x1 image (a Squeeze-Excitation block's two products): per output
// block a matrix-vector product over the packed [C in][16 out] weight rows,
// with eight partial sums so that the FMAs need not wait on each other. The
// weights are read once; the threads split the output blocks so that each
// reads at least kVectorSplitBytes of them (below that, waking a thread
// costs more than the reads).
constexpr int64_t kVectorSplitBytes = 32 * 1024;
constexpr int kVectorSums = 8;

void RunPointwiseVector(const BlockedConvPlan& p, const float* x, const float* residual, float* y,
                        ThreadPool* pool) {
  const int64_t cin = p.in_blocks * kBlock;  // a multiple of kVectorSums
  const int64_t tasks = p.g.batch * p.out_blocks;
  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / p.out_blocks, ob = task % p.out_blocks;
      const float* xn = x + n * cin;
      const float* w = p.weights.data() + ob * cin * kBlock;
      __m512 acc[kVectorSums];
#pragma GCC unroll 8
      for (int k = 0; k < kVectorSums; ++k) acc[k] = _mm512_setzero_ps();
      for (int64_t i = 0; i < cin; i += kVectorSums) {
#pragma GCC unroll 8
        for (int k = 0; k < kVectorSums; ++k)
          acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(xn[i + k]), _mm512_loadu_ps(w + (i + k) * kBlock), acc[k]);
      }
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])),
                                       _mm512_add_ps(_mm512_add_ps(acc[4], acc[5]), _mm512_add_ps(acc[6], acc[7])));
      const int64_t at = (n * p.out_blocks + ob) * kBlock;
      _mm512_storeu_ps(
          y + at, FinishBlockedVector(p, sum, _mm512_loadu_ps(p.bias.data() + ob * kBlock),
                                      residual != nullptr ? residual + at : nullptr, BlockedKeepMask(p, ob)));
    }
  };
  const int64_t block_bytes = cin * kBlock * static_cast<int64_t>(sizeof(float));
  const int64_t per_thread = std::max<int64_t>(1, kVectorSplitBytes / block_bytes);
  if (pool == nullptr || tasks <= per_thread) {
    body(0, tasks, 0);
  } else {
    pool->ParallelFor(tasks, per_thread, body);
  }
}

// All output blocks' weights up to this (in L2 beside the image rows a
// thread reads): threads split a pointwise convolution's pixels, not its
// output blocks.
constexpr int64_t kPointwisePixelsFirstBytes = 256 * 1024;

void RunPointwise(const BlockedConvPlan& p, const float* x, const float* residual, float* y,
                  ThreadPool* pool) {
  if (p.g.out[1] * p.g.out[2] == 1 && p.g.in[1] * p.g.in[2] == 1) {
    RunPointwiseVector(p, x, residual, y, pool);
    return;
  }
  static constexpr auto kOne = TileTable<1>(std::make_integer_sequence<int, kPixels>());
  static constexpr auto kTwo = TileTable<2>(std::make_integer_sequence<int, kPixels>());
  const Window3& g = p.g;
  const int64_t stride = g.stride[1];
  // Stride 1 without pads: the image is one row of pixels in and out.
  const int64_t rows = stride == 1 ? 1 : g.out[1];
  const int64_t cols = stride == 1 ? g.out[1] * g.out[2] : g.out[2];
  const int64_t tiles = (cols + kPixels - 1) / kPixels;
  const int64_t pairs = (p.out_blocks + 1) / 2;
  const int64_t in_plane = g.in[1] * g.in[2] * kBlock, out_plane = g.out[1] * g.out[2] * kBlock;
  const int64_t tasks = g.batch * pairs * rows * tiles;
  // Threads take runs of tasks. Where every pair's weights fit in L2
  // together, the runs go pixels first, pairs inside, so that each thread
  // reads only its part of the image; otherwise pairs first, so that each
  // reads only its part of the weights.
  const int64_t weight_bytes =
      p.out_blocks * p.in_blocks * kBlock * kBlock * static_cast<int64_t>(sizeof(float));
  const bool pixels_first = weight_bytes <= kPointwisePixelsFirstBytes;
  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t rest = task;
      auto digit = [&rest](int64_t count) {  // the task's next index, fastest first
        const int64_t d = rest % count;
        rest /= count;
        return d;
      };
      const int64_t pair_first = pixels_first ? digit(pairs) : 0;
      const int64_t tile = digit(tiles), row = digit(rows);
      const int64_t pair = pixels_first ? pair_first : digit(pairs);
      const int64_t n = rest;
      const int64_t ob = pair * 2;
      const int nb = p.out_blocks - ob >= 2 ? 2 : 1;
      // Tiles of near-equal width (28 = 10 + 9 + 9, not 12 + 12 + 4).
      const int64_t col = tile * cols / tiles;
      const int count = static_cast<int>((tile + 1) * cols / tiles - col);
      PointwiseTile t;
      t.plan = &p;
      t.x = x + n * p.in_blocks * in_plane + (row * stride * g.in[2] + col * stride) * kBlock;
      t.x_pixel_step = stride * kBlock;
      t.x_block_step = in_plane;
      t.w = p.weights.data() + ob * p.in_blocks * kBlock * kBlock;
      t.bias = p.bias.data() + ob * kBlock;
      const int64_t y_at = (n * p.out_blocks + ob) * out_plane + (row * cols + col) * kBlock;
      t.residual = residual != nullptr ? residual + y_at : nullptr;
      t.y = y + y_at;
      t.y_block_step = out_plane;
      t.keep[0] = BlockedKeepMask(p, ob);
      t.keep[1] = nb == 2 ? BlockedKeepMask(p, ob + 1) : 0;
      (nb == 2 ? kTwo : kOne)[static_cast<size_t>(count - 1)](t);
    }
  };
  if (pool == nullptr) {
    body(0, tasks, 0);
  } else {
    pool->ParallelFor(tasks, 4, body);
  }
}

// One output row of one channel block, pixels [col, col + count).
template <bool kChecked>
void DepthwiseTile(const BlockedConvPlan& p, const float* x_plane, const float* w, __m512 bias,
                   const float* residual, float* y, int64_t row, int64_t col, int count, __mmask16 keep) {
  const Window3& g = p.g;
  const int64_t ih = g.in[1], iw = g.in[2], kh = g.kernel[1], kw = g.kernel[2];
  const int64_t sh = g.stride[1], sw = g.stride[2], ph = g.pad_begin[1], pw = g.pad_begin[2];
  __m512 acc[kDepthwisePixels];
#pragma GCC unroll 8
  for (int q = 0; q < kDepthwisePixels; ++q) acc[q] = _mm512_setzero_ps();
  for (int64_t a = 0; a < kh; ++a) {
    const int64_t yy = row * sh - ph + a;
    if (yy < 0 || yy >= ih) continue;
    const float* xrow = x_plane + yy * iw * kBlock;
    for (int64_t b = 0; b < kw; ++b) {
      const __m512 wv = _mm512_loadu_ps(w + (a * kw + b) * kBlock);
      const int64_t x0 = col * sw - pw + b;
      if constexpr (kChecked) {
        // Unrolled, so that the accumulators stay in registers.
#pragma GCC unroll 8
        for (int q = 0; q < kDepthwisePixels; ++q) {
          if (q >= count) break;
          const int64_t xx = x0 + q * sw;
          if (xx < 0 || xx >= iw) continue;
          acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(xrow + xx * kBlock), wv, acc[q]);
        }
      } else {
#pragma GCC unroll 8
        for (int q = 0; q < kDepthwisePixels; ++q)
          acc[q] = _mm512_fmadd_ps(_mm512_loadu_ps(xrow + (x0 + q * sw) * kBlock), wv, acc[q]);
      }
    }
  }
  for (int q = 0; q < count; ++q) {
    const float* r = residual != nullptr ? residual + q * kBlock : nullptr;
    _mm512_storeu_ps(y + q * kBlock, FinishBlockedVector(p, acc[q], bias, r, keep));
  }
}

// The general depthwise loop: per channel block and output row, tiles of
// kDepthwisePixels, the taps that fall into the padding skipped one by one.
void RunDepthwiseChecked(const BlockedConvPlan& p, const float* x, const float* residual, float* y,
                         ThreadPool* pool) {
  const Window3& g = p.g;
  const int64_t oh = g.out[1], ow = g.out[2], iw = g.in[2];
  const int64_t taps = g.kernel[1] * g.kernel[2];
  const int64_t in_plane = g.in[1] * iw * kBlock, out_plane = oh * ow * kBlock;
  const int64_t tasks = g.batch * p.out_blocks * oh;
  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t row = task % oh;
      const int64_t plane = task / oh;  // n * blocks + cb
      const int64_t cb = plane % p.out_blocks;
      const float* x_plane = x + plane * in_plane;
      const float* w = p.weights.data() + cb * taps * kBlock;
      const __m512 bias = _mm512_loadu_ps(p.bias.data() + cb * kBlock);
      const __mmask16 keep = BlockedKeepMask(p, cb);
      const int64_t y_row = plane * out_plane + row * ow * kBlock;
      for (int64_t col = 0; col < ow; col += kDepthwisePixels) {
        const int count = static_cast<int>(std::min<int64_t>(kDepthwisePixels, ow - col));
        const float* r = residual != nullptr ? residual + y_row + col * kBlock : nullptr;
        float* out = y + y_row + col * kBlock;
        const int64_t first = col * g.stride[2] - g.pad_begin[2];
        const int64_t last = (col + kDepthwisePixels - 1) * g.stride[2] - g.pad_begin[2] + g.kernel[2] - 1;
        if (count == kDepthwisePixels && first >= 0 && last < iw) {
          DepthwiseTile<false>(p, x_plane, w, bias, r, out, row, col, count, keep);
        } else {
          DepthwiseTile<true>(p, x_plane, w, bias, r, out, row, col, count, keep);
        }
      }
    }
  };
  if (pool == nullptr) {
    body(0, tasks, 0);
  } else {
    pool->ParallelFor(tasks, 4, body);
  }
}

// A stem's input rows, copied into a zero-padded buffer [C][kh][width]:
// the tiles then read every tap unchecked, the last tile of a row included
// (its extra pixels read zeros and are not stored), and the input's layout
// (row-major or nchw16c) no longer matters. The kh rows of a channel are a
// ring: input row yy sits in slot (yy + pad) mod kh, so that the next output
// row copies only the stride's new rows (the copies of all kh rows each
// time took 8% of ResNet-18's stem).
struct StemRows {
  int64_t width = 0;  // floats per buffered row: pads and whole tiles included
  int64_t Floats(const Window3& g) const { return g.in_channels * g.kernel[1] * width; }
};

StemRows StemRowsOf(const Window3& g) {
  const int64_t tiles = (g.out[2] + kStemPixels - 1) / kStemPixels;
  StemRows r;
  r.width = std::max((tiles * kStemPixels - 1) * g.stride[2] + g.kernel[2], g.pad_begin[2] + g.in[2]);
  r.width = (r.width + kBlock - 1) / kBlock * kBlock;
  return r;
}

// Rows a in [a_begin, a_end) of buffer `buf` for output row `row` of
// image n, each into its ring slot unless the slot already holds it
// (held[slot]: n * ih + the input row there, -1 for none); the columns
// outside the image stay as zeroed.
void FillStemRows(const BlockedConvPlan& p, const StemRows& rows, const float* x, int64_t n, int64_t row,
                  int64_t a_begin, int64_t a_end, float* buf, int64_t* held) {
  const Window3& g = p.g;
  const int64_t ih = g.in[1], iw = g.in[2], kh = g.kernel[1], pw = g.pad_begin[2];
  for (int64_t a = a_begin; a < a_end; ++a) {
    const int64_t yy = row * g.stride[1] - g.pad_begin[1] + a, slot = (row * g.stride[1] + a) % kh;
    if (held[slot] == n * ih + yy) continue;
    held[slot] = n * ih + yy;
    for (int64_t c = 0; c < g.in_channels; ++c) {
      float* dst = buf + (c * kh + slot) * rows.width + pw;
      if (p.input_row_major) {
        std::copy_n(x + ((n * g.in_channels + c) * ih + yy) * iw, iw, dst);
      } else {
        const float* src = x + ((n * ih + yy) * iw) * kBlock + c;
        for (int64_t xx = 0; xx < iw; ++xx) dst[xx] = src[xx * kBlock];
      }
    }
  }
}

// NB blocks of output channels from ob, pixels [col, col + count) of output
// row `row`, from the buffered rows a in [a_begin, a_end). kStride: the
// column stride when known at compile time (0: at run time), so that the
// broadcasts take constant offsets. NB x 14 accumulators + NB weights fit
// the 32 registers.
template <int kStride, int NB>
void StemTile(const BlockedConvPlan& p, const StemRows& rows, const float* buf, int64_t row, int64_t a_begin,
              int64_t a_end, int64_t ob, int64_t col, int count, const float* residual, float* y) {
  const Window3& g = p.g;
  const int64_t kh = g.kernel[1], kw = g.kernel[2];
  const int64_t sw = kStride != 0 ? kStride : g.stride[2];
  const int64_t taps = g.in_channels * kh * kw;
  const float* w = p.weights.data() + ob * taps * kBlock;
  const int64_t w_block_step = taps * kBlock;
  __m512 acc[NB][kStemPixels];
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
#pragma GCC unroll 14
    for (int q = 0; q < kStemPixels; ++q) acc[j][q] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < g.in_channels; ++c) {
    for (int64_t a = a_begin; a < a_end; ++a) {
      const float* xrow = buf + (c * kh + (row * g.stride[1] + a) % kh) * rows.width + col * sw;
      const float* wa = w + (c * kh + a) * kw * kBlock;
      // Not unrolled, and the empty asm hides the pointers' values: GCC
      // would otherwise keep the broadcasts neighbouring taps share in
      // registers, and spill the accumulators for them.
#pragma GCC unroll 1
      for (int64_t b = 0; b < kw; ++b) {
        const float* xb = xrow + b;
        const float* wb = wa + b * kBlock;
        asm("" : "+r"(xb), "+r"(wb));
        __m512 wv[NB];
#pragma GCC unroll 2
        for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_ps(wb + j * w_block_step);
#pragma GCC unroll 14
        for (int q = 0; q < kStemPixels; ++q) {
          const __m512 xv = _mm512_set1_ps(xb[q * sw]);
#pragma GCC unroll 2
          for (int j = 0; j < NB; ++j) acc[j][q] = _mm512_fmadd_ps(xv, wv[j], acc[j][q]);
        }
      }
    }
  }
  const int64_t y_block_step = g.out[1] * g.out[2] * kBlock;
#pragma GCC unroll 2
  for (int j = 0; j < NB; ++j) {
    const __m512 bias = _mm512_loadu_ps(p.bias.data() + (ob + j) * kBlock);
    const __mmask16 keep = BlockedKeepMask(p, ob + j);
#pragma GCC unroll 14
    for (int q = 0; q < kStemPixels; ++q) {
      if (q < count) {
        const int64_t at = j * y_block_step + q * kBlock;
        const float* r = residual != nullptr ? residual + at : nullptr;
        _mm512_storeu_ps(y + at, FinishBlockedVector(p, acc[j][q], bias, r, keep));
      }
    }
  }
}

using StemTileFn = void (*)(const BlockedConvPlan&, const StemRows&, const float*, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int, const float*, float*);

template <int NB>
StemTileFn StemTileFor(int64_t stride) {
  return stride == 1 ? &StemTile<1, NB> : stride == 2 ? &StemTile<2, NB> : &StemTile<0, NB>;
}

void RunStem(const BlockedConvPlan& p, const float* x, const float* residual, float* y, float* scratch,
             int scratch_threads, ThreadPool* pool) {
  const Window3& g = p.g;
  const int64_t oh = g.out[1], ow = g.out[2], ih = g.in[1], kh = g.kernel[1];
  const int64_t sh = g.stride[1], ph = g.pad_begin[1];
  const int64_t out_plane = oh * ow * kBlock;
  const StemRows rows = StemRowsOf(g);
  const StemTileFn tile[2] = {StemTileFor<1>(g.stride[2]), StemTileFor<2>(g.stride[2])};
  std::vector<float> own;
  if (pool != nullptr && pool->num_threads() > scratch_threads) pool = nullptr;
  if (scratch == nullptr) {
    own.resize(static_cast<size_t>(rows.Floats(g)));
    scratch = own.data();
    pool = nullptr;
  }
  // One task per output row, all blocks of output channels (two at a
  // time): the row's buffered input stays in L1 across them. A thread
  // whose task follows its last one copies only the new input rows.
  // held: per thread, the input row in each ring slot (-1: none, and the
  // buffer not yet zeroed).
  const int threads = std::max(1, scratch_threads);
  std::vector<int64_t> held(static_cast<size_t>(threads * kh), -1);
  const int64_t tasks = g.batch * oh;
  auto body = [&](int64_t begin, int64_t end, int thread) {
    float* buf = scratch + thread * rows.Floats(g);
    int64_t* slots = held.data() + thread * kh;
    if (std::all_of(slots, slots + kh, [](int64_t h) { return h < 0; }))
      std::fill_n(buf, rows.Floats(g), 0.0f);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t row = task % oh, n = task / oh;
      const int64_t a_begin = std::max<int64_t>(0, ph - row * sh);
      const int64_t a_end = std::min<int64_t>(kh, ih + ph - row * sh);
      FillStemRows(p, rows, x, n, row, a_begin, a_end, buf, slots);
      for (int64_t ob = 0; ob < p.out_blocks; ob += 2) {
        const int nb = p.out_blocks - ob >= 2 ? 2 : 1;
        const int64_t y_row = (n * p.out_blocks + ob) * out_plane + row * ow * kBlock;
        for (int64_t col = 0; col < ow; col += kStemPixels) {
          const int count = static_cast<int>(std::min<int64_t>(kStemPixels, ow - col));
          const float* r = residual != nullptr ? residual + y_row + col * kBlock : nullptr;
          tile[nb - 1](p, rows, buf, row, a_begin, a_end, ob, col, count, r, y + y_row + col * kBlock);
        }
      }
    }
  };
  if (pool == nullptr) {
    body(0, tasks, 0);
  } else {
    RunStealingTasks(*pool, tasks, body);
  }
}

// 3x3 and 5x5 kernels, column stride 1 or 2: per output row, tiles of up
// to kWidePixels pixels, each input vector of a kernel row loaded once and
// multiplied by every tap column that reads it (KW weight vectors held in
// registers), so that the FMAs, not the loads, bound the loop. Kernel rows
// [a0, a1) and tile input columns [lo, hi) fall inside the image (the
// checked tile tests each column once per kernel row, a branch that does
// not move the accumulators out of registers). xp: the input at kernel row
// a0, input column x0 (the tile's first column, maybe left of the image).
constexpr int kWidePixels = 16;

// One input column J of a kernel row against every tap column B that reads
// it, for output pixel (J - B) / S. Written as folds over index sequences so
// that every accumulator index is a constant from the start and the
// accumulators stay in registers.
template <int KW, int S, int P, int J, int... B>
[[gnu::always_inline]] inline void DepthwiseColumn(__m512 (&acc)[P], const __m512 (&wv)[KW], const float* xr,
                                                   std::integer_sequence<int, B...>) {
  const __m512 xv = _mm512_loadu_ps(xr + J * kBlock);
  auto tap = [&](auto b) {
    constexpr int d = J - decltype(b)::value;
    if constexpr (d >= 0 && d % S == 0 && d / S < P)
      acc[d / S] = _mm512_fmadd_ps(xv, wv[decltype(b)::value], acc[d / S]);
  };
  (tap(std::integral_constant<int, B>()), ...);
}

template <int KW, int S, int P, bool kChecked, int... J>
[[gnu::always_inline]] inline void DepthwiseKernelRow(__m512 (&acc)[P], const __m512 (&wv)[KW], const float* xr,
                                                      int lo, int hi, std::integer_sequence<int, J...>) {
  auto column = [&](auto j) {
    constexpr int kJ = decltype(j)::value;
    if constexpr (kChecked) {
      if (kJ < lo || kJ >= hi) return;
    }
    DepthwiseColumn<KW, S, P, kJ>(acc, wv, xr, std::make_integer_sequence<int, KW>());
  };
  (column(std::integral_constant<int, J>()), ...);
}

template <int KW, int S, int P, bool kChecked>
void DepthwiseWideTile(const BlockedConvPlan& p, const float* xrow, int64_t x0, int64_t row_floats, int64_t a0,
                       int64_t a1, int lo, int hi, const float* w, const float* bias_block, const float* residual,
                       float* y, __mmask16 keep) {
  constexpr int kSpan = (P - 1) * S + KW;  // input columns the tile reads
  __m512 acc[P];
#pragma GCC unroll 16
  for (int q = 0; q < P; ++q) acc[q] = _mm512_setzero_ps();
  const float* xr = xrow + x0 * kBlock;  // column j of the tile at xr + j * kBlock
  for (int64_t a = a0; a < a1; ++a, xr += row_floats) {
    __m512 wv[KW];
#pragma GCC unroll 5
    for (int b = 0; b < KW; ++b) wv[b] = _mm512_loadu_ps(w + (a * KW + b) * kBlock);
    DepthwiseKernelRow<KW, S, P, kChecked>(acc, wv, xr, lo, hi, std::make_integer_sequence<int, kSpan>());
  }
  alignas(64) float done[P * kBlock];
#pragma GCC unroll 16
  for (int q = 0; q < P; ++q) _mm512_store_ps(done + q * kBlock, acc[q]);
  FinishPixels(p, done, P, bias_block, residual, y, keep);
}

using WideTileFn = void (*)(const BlockedConvPlan&, const float*, int64_t, int64_t, int64_t, int64_t, int, int,
                            const float*, const float*, const float*, float*, __mmask16);

struct WideTileFns {
  WideTileFn inside, checked;
};

template <int KW, int S, int... P>
constexpr std::array<WideTileFns, sizeof...(P)> WideTileTable(std::integer_sequence<int, P...>) {
  return {WideTileFns{&DepthwiseWideTile<KW, S, P + 1, false>, &DepthwiseWideTile<KW, S, P + 1, true>}...};
}

// Indexed by the tile's width - 1; null where the kernel or stride has none.
const WideTileFns* WideTiles(int64_t kw, int64_t stride) {
  static constexpr auto k3s1 = WideTileTable<3, 1>(std::make_integer_sequence<int, kWidePixels>());
  static constexpr auto k3s2 = WideTileTable<3, 2>(std::make_integer_sequence<int, kWidePixels>());
  static constexpr auto k5s1 = WideTileTable<5, 1>(std::make_integer_sequence<int, kWidePixels>());
  static constexpr auto k5s2 = WideTileTable<5, 2>(std::make_integer_sequence<int, kWidePixels>());
  if (kw == 3) return stride == 1 ? k3s1.data() : stride == 2 ? k3s2.data() : nullptr;
  if (kw == 5) return stride == 1 ? k5s1.data() : stride == 2 ? k5s2.data() : nullptr;
  return nullptr;
}

void RunDepthwiseWide(const BlockedConvPlan& p, const WideTileFns* tiles, const float* x, const float* residual,
                      float* y, ThreadPool* pool) {
  const Window3& g = p.g;
  const int64_t ih = g.in[1], iw = g.in[2], oh = g.out[1], ow = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2];
  const int64_t sh = g.stride[1], sw = g.stride[2], ph = g.pad_begin[1], pw = g.pad_begin[2];
  const int64_t taps = kh * kw;
  const int64_t in_plane = ih * iw * kBlock, out_plane = oh * ow * kBlock;
  const int64_t tiles_per_row = (ow + kWidePixels - 1) / kWidePixels;
  const int64_t tasks = g.batch * p.out_blocks * oh;
  auto body = [&](int64_t begin, int64_t end, int) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t row = task % oh;
      const int64_t plane = task / oh;  // n * blocks + cb
      const int64_t cb = plane % p.out_blocks;
      const float* x_plane = x + plane * in_plane;
      const float* w = p.weights.data() + cb * taps * kBlock;
      const float* bias = p.bias.data() + cb * kBlock;
      const __mmask16 keep = BlockedKeepMask(p, cb);
      const int64_t yy0 = row * sh - ph;  // the input row of kernel row 0
      const int64_t a0 = std::clamp<int64_t>(-yy0, 0, kh), a1 = std::clamp<int64_t>(ih - yy0, a0, kh);
      const float* xrow = x_plane + (yy0 + a0) * iw * kBlock;
      const int64_t y_row = plane * out_plane + row * ow * kBlock;
      // Tiles of near-equal width (28 = 14 + 14, not 16 + 12).
      for (int64_t t = 0, col = 0; t < tiles_per_row; ++t) {
        const int64_t width = (ow - col) / (tiles_per_row - t);
        const int64_t x0 = col * sw - pw, span = (width - 1) * sw + kw;
        const float* r = residual != nullptr ? residual + y_row + col * kBlock : nullptr;
        float* out = y + y_row + col * kBlock;
        const WideTileFns& fns = tiles[width - 1];
        const bool inside = x0 >= 0 && x0 + span <= iw;
        const int lo = static_cast<int>(std::max<int64_t>(0, -x0));
        const int hi = static_cast<int>(std::clamp<int64_t>(iw - x0, lo, span));
        (inside ? fns.inside : fns.checked)(p, xrow, x0, iw * kBlock, a0, a1, lo, hi, w, bias, r, out, keep);
        col += width;
      }
    }
  };
  if (pool == nullptr) {
    body(0, tasks, 0);
  } else {
    pool->ParallelFor(tasks, 4, body);
  }
}

void RunDepthwise(const BlockedConvPlan& p, const float* x, const float* residual, float* y, ThreadPool* pool) {
  const WideTileFns* tiles = WideTiles(p.g.kernel[2], p.g.stride[2]);
  if (tiles == nullptr) {
    RunDepthwiseChecked(p, x, residual, y, pool);
  } else {
    RunDepthwiseWide(p, tiles, x, residual, y, pool);
  }
}

}  // namespace

int64_t BlockedConvScratchFloats(const BlockedConvPlan& plan, int threads) {
  if (plan.shape == BlockedConvShape::kDense3x3) return BlockedDense3x3PaddedFloats(plan);
  if (plan.shape != BlockedConvShape::kStem) return 0;
  return std::max(1, threads) * StemRowsOf(plan.g).Floats(plan.g);
}

void RunBlockedConvAvx512(const BlockedConvPlan& plan, const float* x, const float* residual, float* y,
                          ThreadPool* pool, float* scratch, int scratch_threads) {
  if (plan.g.batch * plan.out_blocks * plan.g.OutPixels() == 0) return;
  if (plan.shape == BlockedConvShape::kPointwise) {
    RunPointwise(plan, x, residual, y, pool);
  } else if (plan.shape == BlockedConvShape::kStem) {
    RunStem(plan, x, residual, y, scratch, scratch_threads, pool);
  } else if (plan.shape == BlockedConvShape::kDense3x3) {
    RunBlockedDense3x3Avx512(plan, x, residual, y, pool, scratch);
  } else {
    RunDepthwise(plan, x, residual, y, pool);
  }
}

}  // namespace kiln::cpu
