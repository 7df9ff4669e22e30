// The scalar reference kernels: plain loops in the order the math is
// written, what the vector kernels are tested against and what runs where
// no vector ISA is available. The linear and A*B kernels use std::fma in the
// vector kernels' order, so they agree bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "core/half.h"

namespace kiln::cpu::ref {
namespace {

DType DTypeOf(ElemType t) {
  switch (t) {
    case ElemType::kF16: return DType::kF16;
    case ElemType::kBF16: return DType::kBF16;
    default: return DType::kF32;
  }
}

float LoadAs(ElemType t, const void* base, int64_t i) {
  switch (t) {
    case ElemType::kF16: return F16ToF32(static_cast<const uint16_t*>(base)[i]);
    case ElemType::kBF16: return Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

void Linear(const LinearArgs& a) {
  const DType dtype = DTypeOf(a.w_type);
  const int64_t n_end = std::min(a.panel_end * kPanelWidth, a.n_total);
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    const float* x = a.x + m * a.ldx;
    for (int64_t n = a.panel_begin * kPanelWidth; n < n_end; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < a.k_total; ++k) {
        acc = std::fma(x[k], LoadAs(a.w_type, a.w_panels, PackedWeight::Offset(dtype, n, k, a.k_total)), acc);
      }
      a.y[m * a.ldy + n] = a.bias != nullptr ? acc + a.bias[n] : acc;
    }
  }
}

void RmsNorm(const RmsNormArgs& a) {
  const int64_t n = a.dim;
  for (int64_t t = a.t_begin; t < a.t_end; ++t) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const float* x = a.x + t * a.ldx + h * n;
      float* y = a.y + t * a.ldy + h * n;
      const float* src = x;
      if (a.residual != nullptr) {
        float* res = a.residual + t * a.ld_residual + h * n;
        const float* in = a.residual_in != nullptr ? a.residual_in + t * a.ld_residual_in + h * n : res;
        for (int64_t i = 0; i < n; ++i) res[i] = in[i] + x[i];
        src = res;
      }
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(src[i]) * src[i];
      const float mean = static_cast<float>(sum / static_cast<double>(n));
      const float inv_rms = 1.0f / std::sqrt(mean + a.eps);
      for (int64_t i = 0; i < n; ++i) {
        const float normalized = src[i] * inv_rms;
        y[i] = normalized * a.weight[i];
      }
    }
  }
}

// Rotates (x0, x1) by the angle with cosine c and sine s: each product
// rounded, then the sum (separate statements, so nothing fuses them).
void Rotate(float& x0, float& x1, float c, float s) {
  const float x0c = x0 * c, x1s = x1 * s, x1c = x1 * c, x0s = x0 * s;
  x0 = x0c - x1s;
  x1 = x1c + x0s;
}

void Rope(const RopeArgs& a) {
  const int64_t half = a.rotary_dim / 2;
  for (int64_t t = a.t_begin; t < a.t_end; ++t) {
    const float* c = a.cos + static_cast<int64_t>(a.positions[t]) * half;
    const float* s = a.sin + static_cast<int64_t>(a.positions[t]) * half;
    if (a.src != nullptr) {
      for (int64_t i = 0; i < a.heads * a.head_dim; ++i) a.x[t * a.ldx + i] = a.src[t * a.ld_src + i];
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      float* x = a.x + t * a.ldx + h * a.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        if (a.interleaved) {
          Rotate(x[2 * i], x[2 * i + 1], c[i], s[i]);
        } else {
          Rotate(x[i], x[i + half], c[i], s[i]);
        }
      }
    }
  }
}

template <typename F>
void ForEachElement(const ElementwiseArgs& e, F f) {
  for (int64_t r = 0; r < e.rows; ++r) {
    for (int64_t c = 0; c < e.cols; ++c) {
      const float b = e.b != nullptr ? e.b[r * e.ldb + c] : 0.0f;
      e.out[r * e.ldo + c] = f(e.a[r * e.lda + c], b);
    }
  }
}

float Silu(float x) {
  return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));
}
float Gelu(float x) {
  return static_cast<float>(0.5 * x * std::erfc(-static_cast<double>(x) * 0.70710678118654752440));
}
// 0.5 x (1 + tanh(u)) as x / (1 + e^(-2u)): equal, and free of the
// cancellation of 1 + tanh(u) for negative x.
float GeluTanh(float x) {
  const double xd = x;
  const double u = 0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd);
  return static_cast<float>(xd / (1.0 + std::exp(-2.0 * u)));
}

void Add(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float b) { return a + b; });
}
void Mul(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float b) { return a * b; });
}
void Scale(const ElementwiseArgs& e) {
  ForEachElement(e, [s = e.scalar](float a, float) { return a * s; });
}
void SiluMul(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float b) { return Silu(a) * b; });
}
void GeluElementwise(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float) { return Gelu(a); });
}
void GeluTanhElementwise(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float) { return GeluTanh(a); });
}
void GeluMul(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float b) { return Gelu(a) * b; });
}
void GeluTanhMul(const ElementwiseArgs& e) {
  ForEachElement(e, [](float a, float b) { return GeluTanh(a) * b; });
}

template <typename From, typename To, typename F>
void ConvertRows(const ConvertArgs& c, F convert) {
  for (int64_t r = 0; r < c.rows; ++r) {
    const From* src = static_cast<const From*>(c.src) + r * c.lds;
    To* dst = static_cast<To*>(c.dst) + r * c.ldd;
    for (int64_t i = 0; i < c.cols; ++i) dst[i] = convert(src[i]);
  }
}
void F32ToBf16Rows(const ConvertArgs& c) {
  ConvertRows<float, uint16_t>(c, F32ToBf16);
}
void Bf16ToF32Rows(const ConvertArgs& c) {
  ConvertRows<uint16_t, float>(c, Bf16ToF32);
}
void F32ToF16Rows(const ConvertArgs& c) {
  ConvertRows<float, uint16_t>(c, F32ToF16);
}
void F16ToF32Rows(const ConvertArgs& c) {
  ConvertRows<uint16_t, float>(c, F16ToF32);
}

void Softmax(const SoftmaxArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* out = a.out + r * a.ldo;
    const int64_t begin = std::max<int64_t>(a.valid_begin != nullptr ? a.valid_begin[r] : 0, 0);
    const int64_t end = std::min<int64_t>(a.valid_end != nullptr ? a.valid_end[r] : a.cols, a.cols);
    for (int64_t c = 0; c < a.cols; ++c) {
      if (c < begin || c >= end) out[c] = 0.0f;
    }
    if (begin >= end) continue;
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t c = begin; c < end; ++c) row_max = std::max(row_max, x[c] * a.scale);
    if (row_max == -std::numeric_limits<float>::infinity()) {
      for (int64_t c = begin; c < end; ++c) out[c] = 0.0f;
      continue;
    }
    double sum = 0.0;
    for (int64_t c = begin; c < end; ++c) {
      out[c] = std::exp(x[c] * a.scale - row_max);
      sum += out[c];
    }
    for (int64_t c = begin; c < end; ++c) out[c] = static_cast<float>(out[c] / sum);
  }
}

void MatMul(const MatMulArgs& a) {
  for (int64_t m = a.m_begin; m < a.m_end; ++m) {
    for (int64_t n = 0; n < a.n; ++n) {
      if (a.transpose_b) {
        double sum = 0.0;
        for (int64_t k = 0; k < a.k; ++k) sum += static_cast<double>(a.a[m * a.lda + k]) * a.b[n * a.ldb + k];
        a.c[m * a.ldc + n] = static_cast<float>(sum);
      } else {
        float acc = 0.0f;
        for (int64_t k = 0; k < a.k; ++k) acc = std::fma(a.a[m * a.lda + k], a.b[k * a.ldb + n], acc);
        a.c[m * a.ldc + n] = acc;
      }
    }
  }
}

void AttentionOneToken(const AttentionArgs& a, int d, int bs, int64_t row_stride, int64_t block_elems);

// The same block-by-block online softmax as the vector kernel, one element
// at a time, token by token.
void Attention(const AttentionArgs& a) {
  const int d = a.head_dim;
  const int bs = a.block_size;
  const int64_t row_stride = static_cast<int64_t>(a.kv_heads) * d;
  const int64_t block_elems = static_cast<int64_t>(bs) * row_stride;
  for (int32_t t = 0; t < std::max(a.tokens, 1); ++t) {
    AttentionArgs one = a;
    one.q = a.q + t * a.ldq;
    one.out = a.out + t * a.ldo;
    one.first_pos = AttentionFirstPos(a, t);
    one.last_pos = a.last_pos + t;
    AttentionOneToken(one, d, bs, row_stride, block_elems);
  }
}

// One query token of Attention.
void AttentionOneToken(const AttentionArgs& a, int d, int bs, int64_t row_stride, int64_t block_elems) {
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
      const int64_t offset = static_cast<int64_t>(a.block_table[b]) * block_elems + a.kv_head * d;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int j = j0; j <= j1; ++j) {
        double dot = 0.0;
        for (int c = 0; c < d; ++c)
          dot += static_cast<double>(q[c]) * LoadAs(a.kv_type, a.k_pool, offset + j * row_stride + c);
        scores[j] = static_cast<float>(dot) * a.scale;
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
        for (int c = 0; c < d; ++c) {
          acc[c] = std::fma(p, LoadAs(a.kv_type, a.v_pool, offset + j * row_stride + c), acc[c]);
        }
      }
      running_max = new_max;
    }
    float* out = a.out + static_cast<int64_t>(h) * d;
    for (int c = 0; c < d; ++c) out[c] = acc[c] / running_sum;
  }
}

template <typename F>
void ForEachValue(const MathArgs& m, F f) {
  for (int64_t i = 0; i < m.n; ++i) m.y[i] = f(m.x[i]);
}
void Exp(const MathArgs& m) {
  ForEachValue(m, [](float x) { return std::exp(x); });
}
void Tanh(const MathArgs& m) {
  ForEachValue(m, [](float x) { return std::tanh(x); });
}
void Erf(const MathArgs& m) {
  ForEachValue(m, [](float x) { return std::erf(x); });
}

}  // namespace

const KernelTable& Table() {
  static constexpr KernelTable kTable = {
      .isa = Isa::kScalar,
      .linear = &Linear,
      .rms_norm = &RmsNorm,
      .rope = &Rope,
      .add = &Add,
      .mul = &Mul,
      .scale = &Scale,
      .silu_mul = &SiluMul,
      .gelu = &GeluElementwise,
      .gelu_tanh = &GeluTanhElementwise,
      .gelu_mul = &GeluMul,
      .gelu_tanh_mul = &GeluTanhMul,
      .f32_to_bf16 = &F32ToBf16Rows,
      .bf16_to_f32 = &Bf16ToF32Rows,
      .f32_to_f16 = &F32ToF16Rows,
      .f16_to_f32 = &F16ToF32Rows,
      .softmax = &Softmax,
      .matmul = &MatMul,
      .attention = &Attention,
      .exp = &Exp,
      .tanh = &Tanh,
      .erf = &Erf,
  };
  return kTable;
}

}  // namespace kiln::cpu::ref
