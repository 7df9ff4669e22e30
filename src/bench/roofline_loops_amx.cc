// The AMX roofline loops (compiled with AMX-TILE/INT8/BF16): tdpbssd and
// tdpbf16ps on four independent 16 x 16 accumulator tiles from two A and two
// B tiles held in place, so no memory traffic. Called only where
// AmxInt8Usable / AmxBf16Usable say so.
#include "bench/roofline_loops.h"

// GCC 12's AVX-512 intrinsic headers build some vectors from deliberately
// undefined ones and then warn about them (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/kernels/amx.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstring>

namespace kiln::bench::amx {

#if defined(__x86_64__)
namespace {

// Tiles 0-3 the accumulators (16 rows of 16 int32 or fp32), 4-5 the A
// tiles and 6-7 the B tiles (16 rows of 64 bytes), loaded from a and b;
// the accumulators start at zero.
void SetUpTiles(const void* a, const void* b) {
  cpu::AmxTileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  _tile_loadconfig(&c);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// The first element of accumulator tile 0, so that the work is kept.
template <typename T>
double FirstOfTile0() {
  alignas(64) T c[16 * 16];
  _tile_stored(0, c, 64);
  _tile_release();
  return static_cast<double>(c[0]);
}

}  // namespace

double Int8Tiles(int64_t iterations) {
  alignas(64) int8_t a[16 * 64], b[16 * 64];
  std::memset(a, 1, sizeof(a));
  std::memset(b, 1, sizeof(b));
  SetUpTiles(a, b);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  return FirstOfTile0<int32_t>();
}

double Int8BlockTiles(int64_t iterations) {
  alignas(64) int8_t a[16 * 64], b[16 * 64];
  alignas(64) int32_t sums[4][16 * 16] = {};
  alignas(64) float dx[16];
  alignas(64) uint16_t dw[16];
  for (int i = 0; i < 16 * 64; ++i) {
    a[i] = static_cast<int8_t>(i * 37 + 11);
    b[i] = static_cast<int8_t>(i * 53 + 5);
  }
  for (int i = 0; i < 16; ++i) {
    dx[i] = 1e-6f * static_cast<float>(i + 1);
    dw[i] = 0x3c00;  // 1.0
  }
  // Tiles 0-3 the blocks' sums, 4-5 A (16 rows of 32 bytes), 6-7 B (8 rows
  // of 64 bytes), as the GEMM configures them.
  cpu::AmxTileConfig c;
  for (int t = 0; t < 4; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  for (int t = 4; t < 6; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 32;
    c.rows[t + 2] = 8;
    c.colsb[t + 2] = 64;
  }
  _tile_loadconfig(&c);
  __m512 acc[16];
  for (auto& v : acc) v = _mm512_setzero_ps();
  const __m512 w = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dw)));
  auto scale = [&](const int32_t* s) {
    for (int r = 0; r < 16; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(w, _mm512_set1_ps(dx[r])),
                               _mm512_cvtepi32_ps(_mm512_load_si512(s + 16 * r)), acc[r]);
    }
  };
  // Block j: multiplied in tile j % 4, stored one step later, scaled the
  // step after: two blocks ahead (the GEMM runs three).
#define KILN_BLOCK_STEP(tile, a_tile, b_tile, store_tile, j) \
  _tile_zero(tile);                                          \
  _tile_loadd(a_tile, a + 32 * ((j) % 2), 64);               \
  _tile_loadd(b_tile, b + 512 * ((j) % 2), 64);              \
  _tile_dpbssd(tile, a_tile, b_tile);                        \
  scale(sums[((j) + 2) % 4]);                                \
  _tile_stored(store_tile, sums[((j) + 3) % 4], 64)
  for (int64_t i = 0; i < iterations; ++i) {
    KILN_BLOCK_STEP(0, 4, 6, 3, 0);
    KILN_BLOCK_STEP(1, 5, 7, 0, 1);
    KILN_BLOCK_STEP(2, 4, 6, 1, 2);
    KILN_BLOCK_STEP(3, 5, 7, 2, 3);
  }
#undef KILN_BLOCK_STEP
  _tile_release();
  float out[16];
  __m512 total = _mm512_setzero_ps();
  for (const auto& v : acc) total = _mm512_add_ps(total, v);
  _mm512_storeu_ps(out, total);
  return static_cast<double>(out[0]);
}

double Bf16Tiles(int64_t iterations) {
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = 0x3f80;  // 1.0
    b[i] = 0x358c;  // ~1e-6
  }
  SetUpTiles(a, b);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  return FirstOfTile0<float>();
}

#else  // not x86-64: never called

double Int8Tiles(int64_t) { return 0; }
double Int8BlockTiles(int64_t) {
  return 0;
}
double Bf16Tiles(int64_t) { return 0; }

#endif

}  // namespace kiln::bench::amx
