// The scalar reference of the quantized kernels: each block format's dot
// product with int8 activations written as its formula, element by element,
// in the order the vector kernels must reproduce exactly.
//
// Per output y[m, n] (weight row n, activation row m with block scales dx):
//   acc = 0
//   for each block b along K, in order:
//     (d, A, dm, B) = the block's terms below (A and B exact integers)
//     acc = fma(d * dx[b], float(A), acc)
//     acc = fma(dm * dx[b], float(B), acc)       only formats with a B term
//   y = acc (+ bias[n])
// where, with w the stored integer of each element, q the activation's int8
// values and s[i] the sums of its 16-value pieces:
//   Q8_0  A = sum w q                                  (w signed)
//   Q4_0  A = sum w q - 8 (s0 + s1)
//   Q5_0  A = sum w q - 16 (s0 + s1)
//   Q4_1  A = sum w q,  dm = m, B = s0 + s1
//   Q5_1  as Q4_1
//   Q2_K  A = sum_i sc_i sum w q,  dm = dmin, B = -sum_i m_i s_i      (16 pieces)
//   Q3_K  A = sum_i (sc_i - 32) (sum w' q - 4 s_i),  w' = w + 4 in [0, 7]
//   Q4_K  A = sum_j sc_j sum w q,  dm = dmin, B = -sum_j m_j (s_2j + s_2j+1)  (8 pieces of 32)
//   Q5_K  as Q4_K
//   Q6_K  A = sum_i sc_i (sum w q - 32 s_i)            (w unsigned, 6 bits)
//   IQ4_NL  A = sum v q,  v = kIQ4Values[w]             (v signed)
//   IQ4_XS  A = sum_j (ls_j - 32) sum v q                (8 pieces of 32)
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
//           A = sum_i sc_i sum w q,  d = the block's unit  (16 pieces;
//           sc, w and unit as quant/iquant_decode.h: w = +-grid magnitude)
// Integers cannot overflow: |A| < 2^28 for every format and any bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/qkernels/qkernel_table.h"
#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/iquant_decode.h"
#include "quant/ggml_blocks.h"

namespace kiln::cpu::qref {
namespace {

template <typename Block>
Block Load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

// What one weight block contributes: acc = fma(d * dx, A, acc), then
// fma(dm * dx, B, acc) when has_b.
struct Terms {
  float d = 0;
  int32_t a = 0;
  float dm = 0;
  int32_t b = 0;
  bool has_b = false;
};

// Element i (0..31) of the Q4_0/Q4_1/Q5_x nibble packing.
int Nibble32(const uint8_t qs[16], int i) { return i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4); }

// The 5th bit of element i of a Q5_0/Q5_1 block.
int HighBit32(const uint8_t qh[4], int i) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> i) & 1u);
}

// Element e (0..255) of the Q2_K/Q3_K 2-bit packing.
int TwoBits(const uint8_t qs[64], int e) { return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Element e (0..255) of the Q4_K/Q5_K nibble packing.
int Nibble256(const uint8_t qs[128], int e) {
  const uint8_t byte = qs[(e / 64) * 32 + e % 32];
  return (e % 64) < 32 ? (byte & 0x0F) : (byte >> 4);
}

// Element e (0..255) of Q6_K, unsigned (0..63).
int SixBits(const BlockQ6_K& b, int e) {
  const int half = e / 128, k = (e % 128) / 32, l = e % 32;
  const uint8_t low_byte = b.ql[half * 64 + (k % 2) * 32 + l];
  const int low = k < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
  const int high = (b.qh[half * 32 + l] >> (2 * k)) & 3;
  return low | (high << 4);
}

int32_t Sum32(const int16_t* s) { return static_cast<int32_t>(s[0]) + s[1]; }

Terms TermsQ8_0(const uint8_t* p, const int8_t* q, const int16_t*) {
  auto b = Load<BlockQ8_0>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += static_cast<int32_t>(b.qs[i]) * q[i];
  return t;
}

Terms TermsQ4_0(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ4_0>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += Nibble32(b.qs, i) * q[i];
  t.a -= 8 * Sum32(s);
  return t;
}

Terms TermsQ5_0(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ5_0>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += (Nibble32(b.qs, i) | (HighBit32(b.qh, i) << 4)) * q[i];
  t.a -= 16 * Sum32(s);
  return t;
}

Terms TermsQ4_1(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ4_1>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += Nibble32(b.qs, i) * q[i];
  t.has_b = true;
  t.dm = F16ToF32(b.m);
  t.b = Sum32(s);
  return t;
}

Terms TermsQ5_1(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ5_1>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += (Nibble32(b.qs, i) | (HighBit32(b.qh, i) << 4)) * q[i];
  t.has_b = true;
  t.dm = F16ToF32(b.m);
  t.b = Sum32(s);
  return t;
}

Terms TermsQ2_K(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ2_K>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  t.dm = F16ToF32(b.dmin);
  t.has_b = true;
  for (int i = 0; i < kQK_K / 16; ++i) {
    int32_t dot = 0;
    for (int e = 16 * i; e < 16 * i + 16; ++e) dot += TwoBits(b.qs, e) * q[e];
    t.a += (b.scales[i] & 0x0F) * dot;
    t.b -= (b.scales[i] >> 4) * s[i];
  }
  return t;
}

Terms TermsQ3_K(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ3_K>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK_K / 16; ++i) {
    int32_t dot = 0;
    for (int e = 16 * i; e < 16 * i + 16; ++e) {
      const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
      dot += (TwoBits(b.qs, e) + 4 * high) * q[e];
    }
    t.a += (UnpackScaleQ3_K(b.scales, i) - 32) * (dot - 4 * s[i]);
  }
  return t;
}

// Q4_K and Q5_K: `fifth_bit(e)` is element e's 5th bit (always 0 for Q4_K).
template <typename Block, typename FifthBit>
Terms TermsK45(const Block& b, const int8_t* q, const int16_t* s, FifthBit fifth_bit) {
  Terms t;
  t.d = F16ToF32(b.d);
  t.dm = F16ToF32(b.dmin);
  t.has_b = true;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackScaleMinK4(b.scales, j, &sc, &m);
    int32_t dot = 0;
    for (int e = 32 * j; e < 32 * j + 32; ++e) dot += (Nibble256(b.qs, e) + 16 * fifth_bit(e)) * q[e];
    t.a += sc * dot;
    t.b -= m * (static_cast<int32_t>(s[2 * j]) + s[2 * j + 1]);
  }
  return t;
}

Terms TermsQ4_K(const uint8_t* p, const int8_t* q, const int16_t* s) {
  return TermsK45(Load<BlockQ4_K>(p), q, s, [](int) { return 0; });
}

Terms TermsQ5_K(const uint8_t* p, const int8_t* q, const int16_t* s) {
  const auto b = Load<BlockQ5_K>(p);
  return TermsK45(b, q, s, [&b](int e) { return (b.qh[e % 32] >> (e / 32)) & 1; });
}

Terms TermsQ6_K(const uint8_t* p, const int8_t* q, const int16_t* s) {
  auto b = Load<BlockQ6_K>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK_K / 16; ++i) {
    int32_t dot = 0;
    for (int e = 16 * i; e < 16 * i + 16; ++e) dot += SixBits(b, e) * q[e];
    t.a += b.scales[i] * (dot - 32 * s[i]);
  }
  return t;
}

// Element i (0..31) of an IQ4 group's indices, as its table value.
int IQ4Value(const uint8_t qs[16], int i) { return kIQ4Values[Nibble32(qs, i)]; }

Terms TermsIQ4_NL(const uint8_t* p, const int8_t* q, const int16_t*) {
  auto b = Load<BlockIQ4_NL>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int i = 0; i < kQK; ++i) t.a += IQ4Value(b.qs, i) * q[i];
  return t;
}

Terms TermsIQ4_XS(const uint8_t* p, const int8_t* q, const int16_t*) {
  auto b = Load<BlockIQ4_XS>(p);
  Terms t;
  t.d = F16ToF32(b.d);
  for (int j = 0; j < kQK_K / kQK; ++j) {
    int32_t dot = 0;
    for (int i = 0; i < kQK; ++i) dot += IQ4Value(b.qs + 16 * j, i) * q[kQK * j + i];
    t.a += (UnpackScaleIQ4_XS(b, j) - 32) * dot;
  }
  return t;
}

template <DType kType>
Terms TermsGridIQuant(const uint8_t* p, const int8_t* q, const int16_t*) {
  IQuantBlock b;
  DecodeIQuantBlock(kType, p, &b);
  Terms t;
  t.d = b.unit;
  for (int i = 0; i < kQK_K / 16; ++i) {
    int32_t dot = 0;
    for (int j = 0; j < 16; ++j) dot += b.w[16 * i + j] * q[16 * i + j];
    t.a += b.scale[i] * dot;
  }
  return t;
}

using TermsFn = Terms (*)(const uint8_t*, const int8_t*, const int16_t*);

TermsFn TermsFor(DType t) {
  switch (t) {
    case DType::kQ8_0: return &TermsQ8_0;
    case DType::kQ4_0: return &TermsQ4_0;
    case DType::kQ5_0: return &TermsQ5_0;
    case DType::kQ4_1: return &TermsQ4_1;
    case DType::kQ5_1: return &TermsQ5_1;
    case DType::kQ2_K: return &TermsQ2_K;
    case DType::kQ3_K: return &TermsQ3_K;
    case DType::kQ4_K: return &TermsQ4_K;
    case DType::kQ5_K: return &TermsQ5_K;
    case DType::kQ6_K: return &TermsQ6_K;
    case DType::kIQ4_NL: return &TermsIQ4_NL;
    case DType::kIQ4_XS: return &TermsIQ4_XS;
    case DType::kIQ2_XXS: return &TermsGridIQuant<DType::kIQ2_XXS>;
    case DType::kIQ2_XS: return &TermsGridIQuant<DType::kIQ2_XS>;
    case DType::kIQ2_S: return &TermsGridIQuant<DType::kIQ2_S>;
    case DType::kIQ3_XXS: return &TermsGridIQuant<DType::kIQ3_XXS>;
    case DType::kIQ3_S: return &TermsGridIQuant<DType::kIQ3_S>;
    default: return nullptr;
  }
}

// The grid i-quants' terms, with each weight block decoded once for up to
// kRowChunk activation rows instead of once per row: the same terms, added
// in the same order, so the same bits as the loop in Gemm.
void GemmGridIQuant(const QuantGemmArgs& a) {
  constexpr int64_t kRowChunk = 16;
  const int64_t block_bytes = GetDTypeInfo(a.w_type).block_bytes;
  const int64_t blocks = a.k / kQK_K;
  const int64_t n_end = std::min(a.g_end * kQuantGroupRows, a.n_total);
  IQuantBlock w;
  for (int64_t m0 = a.m_begin; m0 < a.m_end; m0 += kRowChunk) {
    const int64_t rows = std::min(kRowChunk, a.m_end - m0);
    for (int64_t n = a.g_begin * kQuantGroupRows; n < n_end; ++n) {
      const uint8_t* row = a.w + n * a.row_bytes;
      float acc[kRowChunk] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        DecodeIQuantBlock(a.w_type, row + b * block_bytes, &w);
        for (int64_t r = 0; r < rows; ++r) {
          const int8_t* q = a.x->row_q(m0 + r) + b * kQK_K;
          int32_t sum = 0;
          for (int i = 0; i < kQK_K / 16; ++i) {
            int32_t dot = 0;
            for (int j = 0; j < 16; ++j) dot += w.w[16 * i + j] * q[16 * i + j];
            sum += w.scale[i] * dot;
          }
          acc[r] = std::fma(w.unit * a.x->row_d(m0 + r)[b], static_cast<float>(sum), acc[r]);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        a.y[(m0 + r) * a.ldy + n] = a.bias != nullptr ? acc[r] + a.bias[n] : acc[r];
      }
    }
  }
}

void Gemm(const QuantGemmArgs& a) {
  if (IsGridIQuant(a.w_type)) return GemmGridIQuant(a);
  const TermsFn terms = TermsFor(a.w_type);
  const int bs = DTypeBlockSize(a.w_type);
  const int64_t block_bytes = GetDTypeInfo(a.w_type).block_bytes;
  const int64_t blocks = a.k / bs;
  const int64_t n_end = std::min(a.g_end * kQuantGroupRows, a.n_total);
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    const int8_t* q = a.x->row_q(m);
    const float* dx = a.x->row_d(m);
    const int16_t* s = a.x->row_sums(m);
    for (int64_t n = a.g_begin * kQuantGroupRows; n < n_end; ++n) {
      const uint8_t* row = a.w + n * a.row_bytes;
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const Terms t = terms(row + b * block_bytes, q + b * bs, s + b * (bs / 16));
        acc = std::fma(t.d * dx[b], static_cast<float>(t.a), acc);
        if (t.has_b) acc = std::fma(t.dm * dx[b], static_cast<float>(t.b), acc);
      }
      a.y[m * a.ldy + n] = a.bias != nullptr ? acc + a.bias[n] : acc;
    }
  }
}

// round-half-even(v) as an int8 within [-127, 127]; NaN gives -127 (as the
// vector kernels' conversion, which yields INT_MIN for it).
int8_t RoundClamp(float v) {
  if (std::isnan(v)) return -127;
  const float r = std::nearbyint(std::clamp(v, -127.0f, 127.0f));
  return static_cast<int8_t>(r);
}

// The scale of a block with largest magnitude amax, and its inverse; a
// scale below the normal range (which 1/d would overflow) counts as zero.
void BlockScale(float amax, float* d, float* inverse) {
  float scale = amax / 127.0f;
  if (!(scale >= std::numeric_limits<float>::min()) || std::isinf(scale)) scale = 0.0f;
  *d = scale;
  *inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
}

void QuantizeRows(const QuantizeRowsArgs& a) {
  const int64_t k = a.out.k;
  const int bs = a.out.block;
  float block[kQK_K];
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    int8_t* q = a.out.q + m * k;
    float* d = a.out.d + m * (k / bs);
    int16_t* sums = a.out.sums + m * (k / 16);
    for (int64_t b = a.b_begin; b < a.b_end; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < bs; ++i) {
        const int64_t at = m * a.ldx + b * bs + i;
        block[i] = a.bf16 ? Bf16ToF32(static_cast<const uint16_t*>(a.x)[at]) : static_cast<const float*>(a.x)[at];
        amax = std::max(amax, std::fabs(block[i]));
      }
      float inverse;
      BlockScale(amax, &d[b], &inverse);
      for (int i = 0; i < bs; ++i) q[b * bs + i] = RoundClamp(block[i] * inverse);
    }
    for (int64_t i = a.b_begin * bs / 16; i < a.b_end * bs / 16; ++i) {
      int32_t sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[i * 16 + j];
      sums[i] = static_cast<int16_t>(sum);
    }
  }
}

void KvQuantize(const KvQuantizeArgs& a) {
  const int64_t d = a.head_dim;
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const float* x = a.x + r * a.ldx + h * d;
      int8_t* q = a.q + (r * a.heads + h) * d;
      float amax = 0.0f;
      for (int64_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(x[i]));
      float inverse;
      BlockScale(amax, &a.scales[r * a.heads + h], &inverse);
      for (int64_t i = 0; i < d; ++i) q[i] = RoundClamp(x[i] * inverse);
    }
  }
}

// Online softmax as the float reference kernel, with keys and values
// dequantized on the fly: score = float(q . k8 in double) * (k_scale * scale),
// and each value row weighted by p * v_scale.
void AttentionI8(const AttentionI8Args& args) {
  const AttentionArgs& a = args.base;
  const int d = a.head_dim;
  const int bs = a.block_size;
  const int64_t row_stride = static_cast<int64_t>(a.kv_heads) * d;
  const int64_t block_elems = static_cast<int64_t>(bs) * row_stride;
  const auto* k_pool = static_cast<const int8_t*>(a.k_pool);
  const auto* v_pool = static_cast<const int8_t*>(a.v_pool);
  for (int h = a.h_begin; h < a.h_end; ++h) {
    const float* q = a.q + static_cast<int64_t>(h) * d;
    float* acc = a.scratch;
    float* scores = a.scratch + d;
    for (int c = 0; c < d; ++c) acc[c] = 0.0f;
    float running_max = -std::numeric_limits<float>::infinity();
    float running_sum = 0.0f;
    for (int b = a.first_pos / bs; b <= a.last_pos / bs; ++b) {
      const int start = b * bs;
      const int j0 = std::max(a.first_pos, start) - start;
      const int j1 = std::min(a.last_pos, start + bs - 1) - start;
      const int64_t slot0 = static_cast<int64_t>(a.block_table[b]) * bs;
      const int64_t offset = static_cast<int64_t>(a.block_table[b]) * block_elems + a.kv_head * d;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = j0; j <= j1; ++j) {
        double dot = 0.0;
        for (int c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k_pool[offset + j * row_stride + c];
        const float k_scale = args.k_scales[(slot0 + j) * a.kv_heads + a.kv_head];
        scores[j] = static_cast<float>(dot) * (k_scale * a.scale);
        if (a.softcap > 0) scores[j] = a.softcap * std::tanh(scores[j] / a.softcap);
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max, block_max);
      const float correction = std::exp(running_max - new_max);
      running_sum *= correction;
      for (int c = 0; c < d; ++c) acc[c] *= correction;
      for (int j = j0; j <= j1; ++j) {
        const float p = std::exp(scores[j] - new_max);
        running_sum += p;
        const float weight = p * args.v_scales[(slot0 + j) * a.kv_heads + a.kv_head];
        for (int c = 0; c < d; ++c) {
          acc[c] = std::fma(weight, static_cast<float>(v_pool[offset + j * row_stride + c]), acc[c]);
        }
      }
      running_max = new_max;
    }
    float* out = a.out + static_cast<int64_t>(h) * d;
    for (int c = 0; c < d; ++c) out[c] = acc[c] / running_sum;
  }
}

}  // namespace

const QuantKernelTable& Table() {
  static constexpr QuantKernelTable kTable = {
      .isa = Isa::kScalar,
      .name = "scalar",
      .quantize_rows = &QuantizeRows,
      .gemm = &Gemm,
      .kv_quantize = &KvQuantize,
      .attention_i8 = &AttentionI8,
  };
  return kTable;
}

}  // namespace kiln::cpu::qref
