// The AMX roofline loops (compiled with AMX-TILE/INT8/BF16): tdpbssd and
// tdpbf16ps on four independent 16 x 16 accumulator tiles from two A and two
// B tiles held in place, so no memory traffic. Called only where
// AmxInt8Usable / AmxBf16Usable say so.
#include "bench/roofline_loops.h"

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
double Bf16Tiles(int64_t) { return 0; }

#endif

}  // namespace kiln::bench::amx
