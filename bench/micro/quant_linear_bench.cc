// Quantized linear throughput at Qwen2.5-0.5B's shapes: GEMV (decode, M = 1)
// and few-row passes (M = 5: verifying four drafted tokens and the next) in
// weight bytes per second with the weights coming from memory, and GEMM
// (prefill and batched decode, M = 16..512) in integer operations per second
// (2 per weight per row), for Q8_0 and Q4_0 (read in place as GGUF rows, and
// repacked: the x8 layout the backend uses) at every linear shape, and every
// other block format the kernels run at one MLP shape (up for the 32-value
// blocks, down for the k-quants; both layouts for those with an x8 copy), on
// 1 and 2 threads; and the LM head's
// shape (vocabulary 151936) for Q8_0 and Q4_0 repacked, as the backend runs them.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/qkernels/quant_linear.h"
#include "backend/cpu/qkernels/quant_matrix.h"
#include "core/thread_pool.h"
#include "quant/quantize_ref.h"

namespace kiln::cpu {
namespace {

// The bytes of `copies` random matrices of one type and shape, kept while
// consecutive runs ask for the same set (bounded by one set, about 100 MB).
struct QuantSet {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<QuantMatrix> matrices;
};

QuantSet BuildMatrices(DType dtype, int64_t n, int64_t k, int copies, bool x8) {
  QuantSet set;
  {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(k));
    const uint64_t row_bytes = DTypeBytes(dtype, static_cast<uint64_t>(k)).value();
    for (int c = 0; c < copies; ++c) {
      // The copies after the first repeat its values at other addresses
      // (what matters for them is where they are, and generating is slow).
      std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(n));
      if (c > 0) {
        std::memcpy(bytes.data(), set.bytes[0].data(), bytes.size());
      } else {
        for (int64_t r = 0; r < n; ++r) {
          for (float& v : row) v = dist(rng);
          (void)QuantizeRowRef(dtype, row.data(), bytes.data() + static_cast<uint64_t>(r) * row_bytes, k);
        }
      }
      QuantMatrix w = MakeQuantMatrix(dtype, bytes.data(), bytes.size(), n, k).value();
      set.matrices.push_back(x8 ? RepackX8(w).value() : w);
      set.bytes.push_back(std::move(bytes));
    }
  }
  return set;
}

const QuantSet& Matrices(DType dtype, int64_t n, int64_t k, int copies, bool x8) {
  static std::tuple<DType, int64_t, int64_t, int, bool> key{};
  static QuantSet set;
  if (key != std::make_tuple(dtype, n, k, copies, x8)) {
    set = QuantSet();
    key = {dtype, n, k, copies, x8};
    set = BuildMatrices(dtype, n, k, copies, x8);
  }
  return set;
}

// Bytes a cold run cycles through: over 96 MB and over twice the last-level
// cache (some server parts have hundreds of MB of it).
double ColdBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::max(96e6, 2.0 * static_cast<double>(l3 > 0 ? l3 : 0));
}

// Args: M, N, K, dtype, threads, cold, x8. Cold runs cycle through enough copies
// (ColdBytes) that the weights come from memory, as a model's do in decode.
void BM_QuantLinear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto dtype = static_cast<DType>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const bool cold = state.range(5) != 0;
  const bool x8 = state.range(6) != 0;
  const double bytes = static_cast<double>(DTypeBytes(dtype, static_cast<uint64_t>(n * k)).value());
  const int copies = cold ? static_cast<int>(ColdBytes() / bytes) + 1 : 1;
  const QuantSet& set = Matrices(dtype, n, k, copies, x8);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (float& v : x) v = dist(rng);
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  const int block = set.matrices[0].activation_block();
  size_t next = 0;
  for (auto _ : state) {
    const QuantizedRows xq = QuantizeActivations(ctx, m, x.data(), false, k, k, block);
    QuantLinear(ctx, m, xq, set.matrices[next], nullptr, y.data(), n);
    next = (next + 1) % set.matrices.size();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["op/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(set.matrices[0].layout() + " " + QuantLinearKernel(ctx, m, set.matrices[0]) + " " +
                 std::to_string(threads) + "t" + (cold ? " cold" : ""));
}

// The 0.5B model's fused q, k and v projection decoding one row from
// memory: three matrices of 896, 128 and 128 rows as the parts of one call
// (as the model runs them), against one matrix of their 1152 rows. Args:
// dtype, threads, parts (1: three, 0: one).
void BM_QuantLinearQkv(benchmark::State& state) {
  const auto dtype = static_cast<DType>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool parts = state.range(2) != 0;
  const int64_t k = 896;
  const std::vector<int64_t> rows = parts ? std::vector<int64_t>{896, 128, 128} : std::vector<int64_t>{1152};
  const double bytes = static_cast<double>(DTypeBytes(dtype, static_cast<uint64_t>(1152 * k)).value());
  const int copies = static_cast<int>(ColdBytes() / bytes) + 1;
  std::vector<QuantSet> sets;
  for (int64_t n : rows) sets.push_back(BuildMatrices(dtype, n, k, copies, true));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k)), y(1152);
  for (float& v : x) v = dist(rng);
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  const int block = sets[0].matrices[0].activation_block();
  size_t next = 0;
  for (auto _ : state) {
    const QuantizedRows xq = QuantizeActivations(ctx, 1, x.data(), false, k, k, block);
    QuantLinearPart p[3];
    int64_t at = 0;
    for (size_t j = 0; j < sets.size(); ++j) {
      p[j] = {&sets[j].matrices[next], nullptr, y.data() + at};
      at += rows[j];
    }
    QuantLinearParts(ctx, 1, xq, p, static_cast<int>(sets.size()), 1152);
    next = (next + 1) % static_cast<size_t>(copies);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QuantLinearQkv)
    ->ArgsProduct({{static_cast<int64_t>(DType::kQ8_0), static_cast<int64_t>(DType::kQ4_0),
                    static_cast<int64_t>(DType::kQ5_0)},
                   {2},
                   {0, 1}})
    ->ArgNames({"dtype", "threads", "parts"})
    ->UseRealTime();

// What verifying drafted tokens costs: one iteration is a pass over one
// activation row, then a pass over `rows` rows (4 drafted tokens and the
// next: 5), each over its own cold copy of the weights, so that the two
// share whatever else the machine is doing. Reports both mean times and
// their ratio. Args: rows, N, K, dtype, threads (repacked, cold).
void BM_QuantLinearFewRowsOverOne(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1), k = state.range(2);
  const auto dtype = static_cast<DType>(state.range(3));
  const int threads = static_cast<int>(state.range(4));
  const double bytes = static_cast<double>(DTypeBytes(dtype, static_cast<uint64_t>(n * k)).value());
  const QuantSet& set = Matrices(dtype, n, k, static_cast<int>(ColdBytes() / bytes) + 2, true);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * k)), y(static_cast<size_t>(rows * n));
  for (float& v : x) v = dist(rng);
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  const int block = set.matrices[0].activation_block();
  size_t next = 0;
  double one_s = 0, few_s = 0;
  for (auto _ : state) {
    for (const int64_t m : {int64_t{1}, rows}) {
      const auto start = std::chrono::steady_clock::now();
      const QuantizedRows xq = QuantizeActivations(ctx, m, x.data(), false, k, k, block);
      QuantLinear(ctx, m, xq, set.matrices[next], nullptr, y.data(), n);
      benchmark::DoNotOptimize(y.data());
      benchmark::ClobberMemory();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      (m == 1 ? one_s : few_s) += s;
      next = (next + 1) % set.matrices.size();
    }
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["one_row_us"] = 1e6 * one_s / iterations;
  state.counters["few_rows_us"] = 1e6 * few_s / iterations;
  state.counters["ratio"] = few_s / one_s;
  state.counters["one_row_bytes/s"] = bytes * iterations / one_s;
  state.SetLabel(set.matrices[0].layout() + " " + QuantLinearKernel(ctx, rows, set.matrices[0]) + " " +
                 std::to_string(threads) + "t cold");
}
// Every linear shape of the 0.5B model: attention (q, o), the MLP (gate and
// up, down) and the LM head, for Q8_0, Q4_0, Q5_0 and Q5_1 (most of a
// Q5_K_M file of this shape) on 2 threads.
void FewRowsArgs(benchmark::internal::Benchmark* b) {
  const int64_t kShapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}, {151936, 896}};  // {N, K}
  for (auto& s : kShapes) {
    for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ5_1}) {
      b->Args({5, s[0], s[1], static_cast<int64_t>(dtype), 2});
    }
  }
  // The 256-value types of the K_M files (and Q3_K, Q2_K's down
  // projections), whose rows must be multiples of 256: the down
  // projection's.
  for (DType dtype : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ3_K, DType::kQ2_K})
    b->Args({5, 896, 4864, static_cast<int64_t>(dtype), 2});
}
BENCHMARK(BM_QuantLinearFewRowsOverOne)
    ->Apply(FewRowsArgs)
    ->ArgNames({"rows", "N", "K", "dtype", "threads"})
    ->UseRealTime();

// Quantizing the activation rows alone, as every quantized linear layer
// starts: what it costs next to the weights' pass at few rows, where one
// thread's share of rows is all the other waits for. Args: M, K, threads.
void BM_QuantizeActivations(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = dist(rng);
  KernelContext ctx;
  ctx.pool = threads > 1 ? &DefaultThreadPool(threads) : nullptr;
  for (auto _ : state) {
    const QuantizedRows xq = QuantizeActivations(ctx, m, x.data(), false, k, k, 32);
    benchmark::DoNotOptimize(xq.q);
    benchmark::ClobberMemory();
  }
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(m * k), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QuantizeActivations)
    ->ArgsProduct({{1, 5, 16, 512}, {896, 4864}, {1, 2}})
    ->ArgNames({"M", "K", "threads"})
    ->UseRealTime();

void QuantLinearArgs(benchmark::internal::Benchmark* b) {
  const int64_t kShapes[][2] = {{896, 896}, {4864, 896}, {896, 4864}};  // {N, K}
  const DType kOthers[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K,
                           DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS,
                           DType::kIQ2_XXS, DType::kIQ3_XXS, DType::kIQ2_XS, DType::kIQ3_S, DType::kIQ2_S};
  auto add = [&](DType dtype, int64_t n, int64_t k, int threads, int x8) {
    // Decoding, batch 1 and 16, and verifying 4 drafted tokens (M = 5)
    // read the weights from memory; the same in cache is their arithmetic.
    for (int64_t m : {1, 5, 16}) b->Args({m, n, k, static_cast<int64_t>(dtype), threads, 1, x8});
    for (int64_t m : {1, 5, 16, 128, 512}) b->Args({m, n, k, static_cast<int64_t>(dtype), threads, 0, x8});
  };
  for (int threads : {1, 2}) {
    for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
      for (int x8 : {0, 1}) {
        for (auto& s : kShapes) add(dtype, s[0], s[1], threads, x8);
      }
    }
    // The LM head, as the backend runs it (repacked).
    for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
      for (int64_t m : {1, 5}) b->Args({m, 151936, 896, static_cast<int64_t>(dtype), threads, 1, 1});
    }
    // The k-quants' 256-value blocks need K = 4864 (896 is not a multiple).
    for (DType dtype : kOthers) {
      for (int x8 : {0, 1}) {
        if (x8 == 1 && !HasX8Layout(dtype)) continue;
        if (QuantActivationBlock(dtype) == 256) {
          add(dtype, 896, 4864, threads, x8);
        } else {
          add(dtype, 4864, 896, threads, x8);
        }
      }
    }
  }
}
BENCHMARK(BM_QuantLinear)
    ->Apply(QuantLinearArgs)
    ->ArgNames({"M", "N", "K", "dtype", "threads", "cold", "x8"})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::cpu

BENCHMARK_MAIN();
