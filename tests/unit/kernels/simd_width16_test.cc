// The generic vector kernels instantiated with a portable 16-lane vector
// type that has the AVX-512 traits' shape (lanes, tile sizes, one vector
// per weight panel, the same reduction tree). It runs on any CPU, so the
// logic of the AVX-512 build (tails, 8-panel and 2-panel tiles, 16-lane
// reductions) is tested even where AVX-512 itself cannot run.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/attention_keys_in_lanes.h"
#include "backend/cpu/kernels/elementwise_simd.h"
#include "backend/cpu/kernels/kernel_table.h"
#include "backend/cpu/kernels/linear_simd.h"
#include "backend/cpu/kernels/matmul_simd.h"
#include "backend/cpu/kernels/norm_simd.h"
#include "backend/cpu/kernels/packed_weight.h"
#include "backend/cpu/kernels/rope_simd.h"
#include "backend/cpu/kernels/softmax_simd.h"
#include "core/half.h"
#include "kernel_test_util.h"

namespace kiln::cpu {
namespace simd_width16_tests {

using testing::BitEqual;
using testing::RandomFloats;

// Lane-by-lane model of SimdAvx512.
struct Width16 {
  static constexpr int kLanes = 16;
  struct V {
    std::array<float, 16> f{};
  };
  struct VI {
    std::array<int32_t, 16> i{};
  };
  using Mask = uint32_t;

  static constexpr int kDirectPanels[7] = {0, 8, 4, 4, 2, 2, 2};
  static constexpr int kBlockedRows = 6;
  static constexpr int kBlockedPanels = 2;
  static constexpr int kPanelVectors = 1;

  template <typename F>
  static V Map(F f) {
    V r;
    for (int i = 0; i < 16; ++i) r.f[i] = f(i);
    return r;
  }
  static V Zero() { return V{}; }
  static V Set1(float x) {
    return Map([&](int) { return x; });
  }
  static V Load(const float* p) {
    return Map([&](int i) { return p[i]; });
  }
  static void Store(float* p, V v) { std::memcpy(p, v.f.data(), sizeof(v.f)); }
  static V LoadPart(const float* p, int n, float fill = 0.0f) {
    return Map([&](int i) { return i < n ? p[i] : fill; });
  }
  static V KeepLanes(V v, int n, float fill) {
    return Map([&](int i) { return i < n ? v.f[i] : fill; });
  }
  static void StorePart(float* p, V v, int n) {
    std::memcpy(p, v.f.data(), sizeof(float) * static_cast<size_t>(n));
  }
  static V LoadBf16(const uint16_t* p) {
    return Map([&](int i) { return Bf16ToF32(p[i]); });
  }
  static V LoadBf16Part(const uint16_t* p, int n) {
    return Map([&](int i) { return i < n ? Bf16ToF32(p[i]) : 0.0f; });
  }
  static void StoreBf16(uint16_t* p, V v) { StoreBf16Part(p, v, 16); }
  static void StoreBf16Part(uint16_t* p, V v, int n) {
    for (int i = 0; i < n; ++i) p[i] = F32ToBf16(v.f[i]);
  }
  static V LoadF16(const uint16_t* p) {
    return Map([&](int i) { return F16ToF32(p[i]); });
  }
  static V LoadF16Part(const uint16_t* p, int n) {
    return Map([&](int i) { return i < n ? F16ToF32(p[i]) : 0.0f; });
  }
  static void StoreF16(uint16_t* p, V v) { StoreF16Part(p, v, 16); }
  static void StoreF16Part(uint16_t* p, V v, int n) {
    for (int i = 0; i < n; ++i) p[i] = F32ToF16(v.f[i]);
  }
  static void LoadPanelF32(const float* p, V* out) { out[0] = Load(p); }
  static void LoadPanelF16(const uint16_t* p, V* out) { out[0] = LoadF16(p); }
  // Column c of a BF16 panel row sits at 2c (c < 8) or 2(c - 8) + 1.
  static void LoadPanelBf16(const uint16_t* p, V* out) {
    out[0] = Map([&](int c) { return Bf16ToF32(p[c < 8 ? 2 * c : 2 * (c - 8) + 1]); });
  }
  static V Add(V a, V b) {
    return Map([&](int i) { return a.f[i] + b.f[i]; });
  }
  static V Sub(V a, V b) {
    return Map([&](int i) { return a.f[i] - b.f[i]; });
  }
  static V Mul(V a, V b) {
    return Map([&](int i) { return a.f[i] * b.f[i]; });
  }
  static V Div(V a, V b) {
    return Map([&](int i) { return a.f[i] / b.f[i]; });
  }
  static V Fma(V a, V b, V c) {
    return Map([&](int i) { return std::fma(a.f[i], b.f[i], c.f[i]); });
  }
  static V Fnma(V a, V b, V c) {
    return Map([&](int i) { return std::fma(-a.f[i], b.f[i], c.f[i]); });
  }
  // As maxps / minps: the second operand when either is NaN.
  static V Max(V a, V b) {
    return Map([&](int i) { return a.f[i] > b.f[i] ? a.f[i] : b.f[i]; });
  }
  static V Min(V a, V b) {
    return Map([&](int i) { return a.f[i] < b.f[i] ? a.f[i] : b.f[i]; });
  }
  static V Abs(V a) {
    return Map([&](int i) { return std::fabs(a.f[i]); });
  }
  static V Xor(V a, V b) {
    return Map([&](int i) { return BitsFloat(FloatBits(a.f[i]) ^ FloatBits(b.f[i])); });
  }
  static V SignBit(V a) {
    return Map([&](int i) { return BitsFloat(FloatBits(a.f[i]) & 0x80000000u); });
  }
  static Mask Less(V a, V b) {
    Mask m = 0;
    for (int i = 0; i < 16; ++i) m |= (a.f[i] < b.f[i] ? 1u : 0u) << i;
    return m;
  }
  static Mask IsNan(V a) {
    Mask m = 0;
    for (int i = 0; i < 16; ++i) m |= (std::isnan(a.f[i]) ? 1u : 0u) << i;
    return m;
  }
  static V Select(Mask m, V t, V f) {
    return Map([&](int i) { return (m >> i) & 1 ? t.f[i] : f.f[i]; });
  }
  static VI RoundToInt(V a) {
    VI r;
    for (int i = 0; i < 16; ++i) r.i[i] = static_cast<int32_t>(std::nearbyint(a.f[i]));
    return r;
  }
  static V IntToFloat(VI a) {
    return Map([&](int i) { return static_cast<float>(a.i[i]); });
  }
  static VI HalfDown(VI a) {
    for (int32_t& x : a.i) x >>= 1;
    return a;
  }
  static VI SubInt(VI a, VI b) {
    for (int i = 0; i < 16; ++i) a.i[i] -= b.i[i];
    return a;
  }
  static V Pow2(VI n) {
    return Map([&](int i) { return BitsFloat(static_cast<uint32_t>(n.i[i] + 127) << 23); });
  }
  // SimdAvx512's tree: halves of 256, then of 128, then pairs.
  template <typename Op>
  static float Reduce(V v, Op op) {
    float a8[8], a4[4];
    for (int i = 0; i < 8; ++i) a8[i] = op(v.f[i], v.f[i + 8]);
    for (int i = 0; i < 4; ++i) a4[i] = op(a8[i], a8[i + 4]);
    return op(op(a4[0], a4[2]), op(a4[1], a4[3]));
  }
  static float ReduceAdd(V v) {
    return Reduce(v, [](float a, float b) { return a + b; });
  }
  static float ReduceMax(V v) {
    return Reduce(v, [](float a, float b) { return a > b ? a : b; });
  }
  static V SwapPairs(V v) {
    return Map([&](int i) { return v.f[i ^ 1]; });
  }
  static V LoadDuplicated(const float* p) {
    return Map([&](int i) { return p[i / 2]; });
  }
  static V EvenSignMask() {
    return Map([&](int i) { return i % 2 == 0 ? -0.0f : 0.0f; });
  }
};

TEST(Width16, LinearMatchesTheScalarKernelBitForBit) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 3}, {150, 77}, {300, 600}}) {
      std::vector<float> w = RandomFloats(static_cast<size_t>(n * k), 1);
      std::vector<uint16_t> w16 = dtype == DType::kBF16 ? testing::ToBf16(w) : testing::ToF16(w);
      auto packed = PackLinearWeight(
          dtype, dtype == DType::kF32 ? static_cast<const void*>(w.data()) : w16.data(), n, k);
      ASSERT_TRUE(packed.ok());
      for (int64_t rows : {1, 2, 3, 5, 7, 15, 16, 40}) {
        std::vector<float> x = RandomFloats(static_cast<size_t>(rows * k), 2);
        std::vector<float> bias = RandomFloats(static_cast<size_t>(n), 3);
        std::vector<float> scratch(kLinearScratchFloats);
        std::vector<float> want(static_cast<size_t>(rows * n)), got(want.size());
        LinearArgs args{x.data(), k, ElemTypeOf(dtype), packed->data(), n, k, bias.data(), want.data(), n, 0,
                        rows,     0, packed->panels(),  scratch.data()};
        ref::Table().linear(args);
        args.y = got.data();
        VecLinear<Width16>(args);
        ASSERT_TRUE(BitEqual(got.data(), want.data(), want.size()))
            << DTypeName(dtype) << " n " << n << " k " << k << " rows " << rows;
      }
    }
  }
}

TEST(Width16, RopeAndMatMulMatchTheScalarKernelsBitForBit) {
  for (bool interleaved : {false, true}) {
    for (int64_t rotary : {6, 34, 64}) {
      const int64_t half = rotary / 2, head_dim = 64, heads = 2, tokens = 3;
      std::vector<float> cos = RandomFloats(static_cast<size_t>(10 * half), 4),
                         sin = RandomFloats(cos.size(), 5);
      std::vector<int32_t> positions = {9, 0, 4};
      std::vector<float> x = RandomFloats(static_cast<size_t>(tokens * heads * head_dim), 6), y = x;
      RopeArgs args{x.data(),         heads * head_dim, heads,      head_dim, rotary, interleaved,
                    positions.data(), cos.data(),       sin.data(), 0,        tokens};
      ref::Table().rope(args);
      args.x = y.data();
      VecRope<Width16>(args);
      ASSERT_TRUE(BitEqual(x.data(), y.data(), x.size()))
          << "rotary " << rotary << " interleaved " << interleaved;
    }
  }
  const int64_t m = 3, n = 37, k = 21;
  std::vector<float> a = RandomFloats(static_cast<size_t>(m * k), 7),
                     b = RandomFloats(static_cast<size_t>(k * n), 8);
  std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
  MatMulArgs args{a.data(), k, b.data(), n, false, want.data(), n, 0, m, n, k};
  ref::Table().matmul(args);
  args.c = got.data();
  VecMatMul<Width16>(args);
  EXPECT_TRUE(BitEqual(got.data(), want.data(), want.size()));
}

TEST(Width16, NormSoftmaxMathAndActivationsAgreeWithTheScalarKernels) {
  for (int64_t dim : {1, 15, 16, 17, 100, 896}) {
    std::vector<float> x = RandomFloats(static_cast<size_t>(2 * dim), 9, -4.0f, 4.0f);
    std::vector<float> w = RandomFloats(static_cast<size_t>(dim), 10);
    std::vector<float> want(x.size()), got(x.size());
    RmsNormArgs norm{x.data(), dim, nullptr, 0, want.data(), dim, w.data(), dim, 1, 0, 2, 1e-6f};
    ref::Table().rms_norm(norm);
    norm.y = got.data();
    VecRmsNorm<Width16>(norm);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i])) << "rmsnorm " << i;

    SoftmaxArgs soft{x.data(), dim, want.data(), dim, 2, dim, 0.7f, nullptr, nullptr};
    ref::Table().softmax(soft);
    soft.out = got.data();
    VecSoftmax<Width16>(soft);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-6 * want[i]) << "softmax " << i;

    ElementwiseArgs act{x.data(), dim, x.data() + dim, dim, want.data(), dim, 1, dim, 0.0f};
    for (auto [r, v] : {std::pair{ref::Table().silu_mul, &VecSiluMul<Width16>},
                        {ref::Table().gelu_mul, &VecGeluMul<Width16>},
                        {ref::Table().gelu_tanh_mul, &VecGeluTanhMul<Width16>}}) {
      act.out = want.data();
      r(act);
      act.out = got.data();
      v(act);
      for (int64_t i = 0; i < dim; ++i)
        ASSERT_NEAR(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)],
                    4e-6 * std::fabs(want[static_cast<size_t>(i)]) + 1e-30);
    }
  }
  std::vector<float> xs = RandomFloats(1000, 11, -100.0f, 88.7f), ys(xs.size());
  VecExpArray<Width16>(MathArgs{xs.data(), ys.data(), 1000});
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    ASSERT_NEAR(ys[i], want, 2.4e-7 * want + 1.5e-45) << "exp(" << xs[i] << ")";  // subnormals: one step
  }
}

TEST(Width16, AttentionAgreesWithTheScalarKernel) {
  const int32_t block_size = 5, kv_heads = 2, head_dim = 20, heads = 4, blocks = 8;
  std::vector<float> k_pool =
      RandomFloats(static_cast<size_t>(blocks * block_size * kv_heads * head_dim), 12);
  std::vector<float> v_pool = RandomFloats(k_pool.size(), 13);
  std::vector<int32_t> table = {3, 0, 7, 1, 5, 2};
  std::vector<float> q = RandomFloats(static_cast<size_t>(heads * head_dim), 14);
  for (auto [first, last] : {std::pair{0, 0}, {0, 27}, {6, 22}}) {
    std::vector<float> want(q.size()), got(q.size());
    std::vector<float> scratch(static_cast<size_t>(AttentionScratchFloats(2, block_size, head_dim)));
    for (int32_t kv = 0; kv < kv_heads; ++kv) {
      AttentionArgs args{q.data(),     want.data(),    kv * 2,        kv * 2 + 2,    2,
                         kv,           head_dim,       0.2f,          first,         last,
                         table.data(), ElemType::kF32, k_pool.data(), v_pool.data(), block_size,
                         kv_heads,     scratch.data()};
      ref::Table().attention(args);
      args.out = got.data();
      VecAttention<Width16>(args);
    }
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6) << first << ".." << last << " " << i;
  }
}

}  // namespace simd_width16_tests
}  // namespace kiln::cpu
