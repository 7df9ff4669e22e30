// The fifth bits of an x8 tile of Q5_0 or Q5_1 as byte masks on 512 bits,
// shared by the VNNI kernels and the AMX kernel's unpacking. Each kernel
// file is compiled for its own ISA, so the function has internal linkage:
// no file takes another's copy.
#pragma once

#include <immintrin.h>

#if defined(__AVX512BW__)
namespace kiln::cpu {
namespace {

// In each 32-bit lane of qh (a row's 32 fifth bits), bits shift..shift+3
// as a mask of the lane's bytes 0..3.
inline __mmask64 X8FifthBitMask(__m512i qh, int shift) {
  const __m512i spread =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __m512i low_byte = _mm512_shuffle_epi8(_mm512_srli_epi32(qh, shift), spread);
  return _mm512_test_epi8_mask(low_byte, _mm512_set1_epi32(0x08040201));
}

}  // namespace
}  // namespace kiln::cpu
#endif
