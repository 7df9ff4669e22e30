// The AVX-512 kernel of blocked_channel_gather.h: per pixel, each output
// block is a few masked two-source permutes (vpermt2ps) of input blocks.
// GCC 12 flags the vector intrinsics' own undefined-value idiom (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"

namespace kiln::cpu {

void BlockedGatherBlocksAvx512(const BlockedGatherPlan& plan, const float* const* inputs, float* output,
                               int64_t n, int64_t begin, int64_t end) {
  const int64_t P = plan.pixels;
  for (int64_t ob = begin; ob < end; ++ob) {
    float* out = output + (n * plan.output_blocks + ob) * P * kChannelBlock;
    const std::vector<LanePermute>& permutes = plan.blocks[static_cast<size_t>(ob)];
    auto source = [&](int32_t in, int64_t block) {
      return inputs[in] + (n * plan.input_blocks[static_cast<size_t>(in)] + block) * P * kChannelBlock;
    };
    if (permutes.size() == 1) {
      // The common case (a shuffle's interleave, a slice's window): one permute per pixel.
      const LanePermute& lp = permutes[0];
      const float* a = source(lp.input0, lp.block0);
      const float* b = source(lp.input1, lp.block1);
      const __m512i idx = _mm512_loadu_si512(lp.index);
      const auto m = static_cast<__mmask16>(lp.mask);
      for (int64_t p = 0; p < P; ++p) {
        const __m512 v = _mm512_maskz_permutex2var_ps(m, _mm512_loadu_ps(a + p * kChannelBlock), idx,
                                                      _mm512_loadu_ps(b + p * kChannelBlock));
        _mm512_storeu_ps(out + p * kChannelBlock, v);
      }
      continue;
    }
    for (int64_t p = 0; p < P; ++p) _mm512_storeu_ps(out + p * kChannelBlock, _mm512_setzero_ps());
    for (const LanePermute& lp : permutes) {
      const float* a = source(lp.input0, lp.block0);
      const float* b = source(lp.input1, lp.block1);
      const __m512i idx = _mm512_loadu_si512(lp.index);
      const auto m = static_cast<__mmask16>(lp.mask);
      for (int64_t p = 0; p < P; ++p) {
        const __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(a + p * kChannelBlock), idx,
                                                _mm512_loadu_ps(b + p * kChannelBlock));
        float* o = out + p * kChannelBlock;
        _mm512_storeu_ps(o, _mm512_mask_mov_ps(_mm512_loadu_ps(o), m, v));
      }
    }
  }
}

}  // namespace kiln::cpu
