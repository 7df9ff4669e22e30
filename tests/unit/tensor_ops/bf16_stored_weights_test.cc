// The bf16 matrix product's weight as a compiled artifact stores it
// (matmul_bf16.h): made with a LaidOutWeights, the kernel records B rounded
// to bf16 in the format oneDNN picked; made again over those bytes, it takes
// them where they lie (nothing laid out again) and computes the same bytes,
// both close to the plain fp32 loops on bf16-rounded operands. Run wherever
// oneDNN makes the bf16 product (natively with AVX-512 BF16 or AMX, emulated
// on plain AVX-512); skipped where it refuses it (KILN_ISA=avx2|scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/tensor_kernels/matmul_bf16.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace kiln {
namespace bf16_stored_weights_tests {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

float Rounded(float x) { return Bf16ToF32(F32ToBf16(x)); }

// C = A * (scale * B) with A and scale * B rounded to bf16, in double.
std::vector<float> Reference(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                             int64_t k, float scale) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<double>(Rounded(a[i * k + p])) * Rounded(scale * b[p * n + j]);
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

struct Made {
  cpu::TensorKernel kernel;
  bool refused = false;
};

Made Make(const cpu::Bf16MatMulSpec& spec) {
  auto k = cpu::MakeOneDnnBf16MatMul(spec);
  if (!k.ok()) {
    EXPECT_EQ(k.status().code(), StatusCode::kUnsupported) << k.status().ToString();
    return {{}, true};
  }
  return {std::move(*k), false};
}

std::vector<float> RunProduct(const cpu::TensorKernel& kernel, const std::vector<float>& a, int64_t m, int64_t n,
                       ThreadPool* pool) {
  std::vector<float> c(static_cast<size_t>(m * n), -1.0f);
  std::vector<uint8_t> scratch(kernel.scratch_bytes + 64);
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
  const void* inputs[] = {a.data(), nullptr};
  void* outputs[] = {c.data()};
  cpu::TensorCall call{inputs, outputs, aligned, pool};
  Status s = kernel.run(call);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return c;
}

TEST(Bf16StoredWeights, AStoredWeightIsTakenInPlaceAndGivesTheSameBytes) {
  ThreadPool pool(2);
  const int64_t m = 24, n = 40, k = 72;
  for (float scale : {1.0f, 0.5f}) {  // MatMul's B, and Gemm's alpha * B
    SCOPED_TRACE(scale);
    const std::vector<float> a = Random(static_cast<size_t>(m * k), 1);
    const std::vector<float> b = Random(static_cast<size_t>(k * n), 2);
    cpu::Bf16MatMulSpec spec;
    spec.m = m;
    spec.n = n;
    spec.k = k;
    spec.b = b.data();
    spec.b_scale = scale;
    LaidOutWeights compiling;
    spec.slot = cpu::LaidOutSlot{&compiling, "product"};
    Made first = Make(spec);
    if (first.refused) GTEST_SKIP() << "oneDNN makes no bf16 matmul at this ISA";
    const std::vector<LaidOutWeights::Entry> recorded = compiling.Recorded();
    ASSERT_EQ(recorded.size(), 1u);
    EXPECT_EQ(recorded[0].node, "product");
    EXPECT_EQ(recorded[0].layout.rfind("onednn:", 0), 0u) << recorded[0].layout;
    // bf16: two bytes per element of B, at least.
    EXPECT_GE(recorded[0].bytes.size(), static_cast<size_t>(k * n * 2));
    const std::vector<uint8_t> stored(recorded[0].bytes.begin(), recorded[0].bytes.end());

    LaidOutWeights loading;
    loading.AddStored("product", recorded[0].layout, stored);
    spec.slot = cpu::LaidOutSlot{&loading, "product"};
    // The stored bytes are read, not the weight: a B of zeros would show.
    const std::vector<float> zeros(b.size(), 0.0f);
    spec.b = zeros.data();
    Made second = Make(spec);
    ASSERT_FALSE(second.refused);
    EXPECT_EQ(loading.adopted(), 1);
    EXPECT_EQ(loading.laid_out(), 0);

    const std::vector<float> want = RunProduct(first.kernel, a, m, n, &pool);
    const std::vector<float> got = RunProduct(second.kernel, a, m, n, &pool);
    EXPECT_TRUE(got == want) << "the stored weight gives other bytes";
    const std::vector<float> reference = Reference(a, b, m, n, k, scale);
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_NEAR(got[i], reference[i], 1e-4f * (1.0f + std::fabs(reference[i]))) << i;
    }

    // A stored copy of another size (another format) is not taken.
    LaidOutWeights other;
    other.AddStored("product", recorded[0].layout, std::span<const uint8_t>(stored.data(), stored.size() / 2));
    spec.b = b.data();
    spec.slot = cpu::LaidOutSlot{&other, "product"};
    Made third = Make(spec);
    ASSERT_FALSE(third.refused);
    EXPECT_EQ(other.adopted(), 0);
    EXPECT_EQ(other.laid_out(), 1);
    EXPECT_TRUE(RunProduct(third.kernel, a, m, n, &pool) == want);
  }
}

}  // namespace bf16_stored_weights_tests
}  // namespace kiln
