// MatMul, Gemm and Einsum: the packed fp32 paths against plain loops on
// random shapes (odd sizes, broadcast batch dims, 1-d operands, transposes),
// weights packed at compile time or per call, one thread or several.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/einsum_kernel.h"
#include "backend/cpu/tensor_kernels/packed_gemm.h"
#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln {
namespace matmul_ops_tests {

TensorData RandomF32(std::vector<int64_t> dims, std::mt19937* rng) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(*rng);
  return TensorData::FromValues<float>(DType::kF32, std::move(dims), v);
}

// max |got - want| <= 1e-5 * (1 + sum of |terms|) per element, approximated
// by the scale of the operands: values in [-1, 1] and k terms.
void ExpectNear(const TensorData& got, const std::vector<float>& want, int64_t k, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.type().ElementCount()), want.size()) << what;
  const float* g = got.As<float>();
  const float tol = 2e-6f * static_cast<float>(k + 1);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(g[i], want[i], tol) << what << " element " << i;
  }
}

std::vector<float> ReferenceMatMul(const TensorData& a, const TensorData& b) {
  auto s = MatMulShapeOf("MatMul", "ref", a.type().dims, b.type().dims).value();
  std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n));
  cpu::ReferenceBatchedMatMul<float>(s.batch, s.m, s.n, s.k, a.As<float>(), s.a_index.data(), s.m * s.k, s.k,
                                     1, b.As<float>(), s.b_index.data(), s.k * s.n, s.n, 1, c.data());
  return c;
}

struct MatMulCase {
  std::vector<int64_t> a, b;
};

TEST(MatMulOps, PackedPathsMatchThePlainLoops) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const std::vector<MatMulCase> cases = {
      {{1, 1}, {1, 1}},
      {{3, 5}, {5, 7}},
      {{17, 33}, {33, 19}},
      {{197, 64}, {64, 197}},
      {{2, 3, 7, 9}, {2, 3, 9, 11}},
      {{4, 1, 5, 6}, {3, 6, 17}},
      {{5, 8}, {2, 3, 8, 4}},
      {{9}, {9, 13}},
      {{6, 10, 9}, {9}},
      {{9}, {9}},
      {{1, 7, 3}, {4, 3, 1}},
      {{37, 300}, {300, 35}},
      // One B for many A matrices: run as one taller product.
      {{19, 1, 24}, {24, 40}},
      {{2, 5, 3, 16}, {16, 9}},
  };
  for (const MatMulCase& c : cases) {
    const TensorData a = RandomF32(c.a, &rng), b = RandomF32(c.b, &rng);
    const std::vector<float> want = ReferenceMatMul(a, b);
    for (bool constant : {false, true}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        cpu::TensorOpRun run;
        run.op_type = "MatMul";
        run.inputs = {a, b};
        run.inputs_are_constants = constant;
        run.pool = p;
        auto out = cpu::RunTensorOp(run);
        ASSERT_TRUE(out.ok()) << out.status().message();
        const std::string what = "[" + DimsToString(c.a) + "] x [" + DimsToString(c.b) +
                                 "] constant=" + std::to_string(constant) +
                                 " threads=" + std::to_string(p ? 2 : 1);
        auto s = MatMulShapeOf("MatMul", "ref", c.a, c.b).value();
        EXPECT_EQ((*out)[0].type().dims, s.out_dims) << what;
        ExpectNear((*out)[0], want, s.k, what);
      }
    }
  }
}

TEST(MatMulOps, FusedMatMulAddsTheBiasRow) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  for (const std::vector<int64_t>& bias_dims : {std::vector<int64_t>{37}, std::vector<int64_t>{1, 1, 37}}) {
    const TensorData a = RandomF32({2, 5, 70}, &rng), b = RandomF32({70, 37}, &rng),
                     bias = RandomF32(bias_dims, &rng);
    std::vector<float> want = ReferenceMatMul(a, b);
    for (size_t i = 0; i < want.size(); ++i) want[i] += bias.As<float>()[i % 37];
    for (bool constant : {false, true}) {
      cpu::TensorOpRun run;
      run.op_type = "kiln.FusedMatMul";
      run.inputs = {a, b, bias};
      run.inputs_are_constants = constant;
      run.pool = &pool;
      auto out = cpu::RunTensorOp(run);
      ASSERT_TRUE(out.ok()) << out.status().message();
      ExpectNear((*out)[0], want, 70, "fused matmul");
    }
  }
  cpu::TensorOpRun bad;
  bad.op_type = "kiln.FusedMatMul";
  bad.node = "fc";
  bad.inputs = {RandomF32({2, 3}, &rng), RandomF32({3, 4}, &rng), RandomF32({3}, &rng)};
  auto out = cpu::RunTensorOp(bad);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("kiln.FusedMatMul fc"), std::string::npos) << out.status().message();
}

TEST(MatMulOps, FusedMatMulTakesBTransposed) {
  // Attention's Q K^T with K as [batch, heads, keys, dim].
  std::mt19937 rng(19);
  ThreadPool pool(2);
  const TensorData q = RandomF32({2, 3, 17, 24}, &rng), key = RandomF32({2, 3, 13, 24}, &rng);
  std::vector<float> kt(key.type().ElementCount());
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t t = 0; t < 13; ++t) {
      for (int64_t d = 0; d < 24; ++d)
        kt[static_cast<size_t>((i * 24 + d) * 13 + t)] = key.As<float>()[(i * 13 + t) * 24 + d];
    }
  }
  const std::vector<float> want =
      ReferenceMatMul(q, TensorData::FromValues<float>(DType::kF32, {2, 3, 24, 13}, kt));
  for (bool constant : {false, true}) {
    cpu::TensorOpRun run;
    run.op_type = "kiln.FusedMatMul";
    run.attrs.SetInt("trans_b", 1);
    run.inputs = {q, key};
    run.inputs_are_constants = constant;
    run.pool = &pool;
    auto out = cpu::RunTensorOp(run);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].type().dims, (std::vector<int64_t>{2, 3, 17, 13}));
    ExpectNear((*out)[0], want, 24, "trans_b");
  }
}

TEST(MatMulOps, IntegerMatMulIsExact) {
  cpu::TensorOpRun run;
  run.op_type = "MatMul";
  run.inputs = {TensorData::FromValues<int64_t>(DType::kI64, {2, 2}, {1, 2, 3, 4}),
                TensorData::FromValues<int64_t>(DType::kI64, {2}, {5, 6})};
  auto out = cpu::RunTensorOp(run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].type().dims, std::vector<int64_t>{2});
  EXPECT_EQ((*out)[0].As<int64_t>()[0], 17);
  EXPECT_EQ((*out)[0].As<int64_t>()[1], 39);
}

TEST(MatMulOps, InnerDimensionMismatchNamesOpAndNode) {
  cpu::TensorOpRun run;
  run.op_type = "MatMul";
  run.node = "proj";
  std::mt19937 rng(1);
  run.inputs = {RandomF32({2, 3}, &rng), RandomF32({4, 5}, &rng)};
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("MatMul proj"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("inner"), std::string::npos) << out.status().message();
}

struct GemmCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  double alpha, beta;
  std::vector<int64_t> c;  // {-1}: no C
};

TEST(GemmOps, PackedPathsMatchThePlainLoops) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const std::vector<GemmCase> cases = {
      {3, 5, 7, false, false, 1.0, 1.0, {-1}},       {17, 33, 19, true, false, 0.5, 2.0, {33}},
      {17, 33, 19, false, true, 1.0, 1.0, {1, 33}},  {8, 20, 300, true, true, 1.5, -1.0, {8, 1}},
      {1, 1000, 384, false, true, 1.0, 1.0, {1000}}, {6, 7, 5, false, false, 2.0, 0.5, {6, 7}},
      {4, 9, 3, false, true, 1.0, 3.0, {}},          {4, 9, 3, false, false, 1.0, 1.0, {1}},
  };
  for (const GemmCase& c : cases) {
    const TensorData a =
        RandomF32(c.trans_a ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k}, &rng);
    const TensorData b =
        RandomF32(c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n}, &rng);
    const bool has_c = c.c != std::vector<int64_t>{-1};
    const TensorData cc = has_c ? RandomF32(c.c, &rng) : TensorData();
    std::vector<float> want(static_cast<size_t>(c.m * c.n));
    const int64_t c_rows = c.c.size() == 2 ? c.c[0] : 1, c_cols = c.c.empty() ? 1 : c.c.back();
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const float av = a.As<float>()[c.trans_a ? kk * c.m + i : i * c.k + kk];
          const float bv = b.As<float>()[c.trans_b ? j * c.k + kk : kk * c.n + j];
          sum += static_cast<double>(av) * bv;
        }
        double v = c.alpha * sum;
        if (has_c) v += c.beta * cc.As<float>()[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)];
        want[static_cast<size_t>(i * c.n + j)] = static_cast<float>(v);
      }
    }
    for (bool constant : {false, true}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        cpu::TensorOpRun run;
        run.op_type = "Gemm";
        run.attrs.SetInt("transA", c.trans_a);
        run.attrs.SetInt("transB", c.trans_b);
        run.attrs.SetFloat("alpha", c.alpha);
        run.attrs.SetFloat("beta", c.beta);
        run.inputs = {a, b};
        if (has_c) run.inputs.push_back(cc);
        run.inputs_are_constants = constant;
        run.pool = p;
        auto out = cpu::RunTensorOp(run);
        ASSERT_TRUE(out.ok()) << out.status().message();
        const std::string what = "gemm m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                                 " k=" + std::to_string(c.k) + " constant=" + std::to_string(constant);
        EXPECT_EQ((*out)[0].type().dims, (std::vector<int64_t>{c.m, c.n})) << what;
        ExpectNear((*out)[0], want, c.k * 3, what);
      }
    }
  }
}

TEST(GemmOps, MismatchedInnerDimensionIsAnError) {
  cpu::TensorOpRun run;
  run.op_type = "Gemm";
  run.node = "fc";
  run.attrs.SetInt("transB", 1);
  std::mt19937 rng(1);
  run.inputs = {RandomF32({2, 3}, &rng), RandomF32({3, 4}, &rng)};
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Gemm fc"), std::string::npos) << out.status().message();
}

// Einsum's kernel against its plain loop, run on the same inputs.
// Runs Einsum's kernel (the plain loop's with `loops`) on inputs, those
// marked in `constant` given to the factory as compile-time constants.
std::vector<float> RunEinsum(const std::string& equation, const std::vector<TensorData>& inputs,
                             const TensorType& out_type, bool loops, std::vector<bool> constant = {},
                             ThreadPool* pool = nullptr, std::string* impl = nullptr) {
  AttributeMap attrs;
  attrs.SetString("equation", equation);
  cpu::TensorKernelArgs args;
  args.op_type = "Einsum";
  args.node = "ref";
  args.attrs = &attrs;
  std::vector<const void*> ptrs;
  constant.resize(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.inputs.push_back(inputs[i].type());
    args.present.push_back(true);
    args.constants.push_back(constant[i] ? &inputs[i] : nullptr);
    ptrs.push_back(inputs[i].data());
  }
  args.outputs = {out_type};
  auto kernel = loops ? cpu::MakeEinsumReference(args) : cpu::MakeTensorKernel(args);
  EXPECT_TRUE(kernel.ok()) << kernel.status().message();
  if (impl != nullptr) *impl = kernel->impl;
  std::vector<float> out(static_cast<size_t>(out_type.ElementCount()) + 1);
  void* out_ptr = out.data();
  std::vector<uint8_t> scratch(kernel->scratch_bytes + 128);
  cpu::TensorCall call;
  call.inputs = ptrs.data();
  call.outputs = &out_ptr;
  call.scratch = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  call.pool = pool;
  EXPECT_TRUE(kernel->run(call).ok());
  out.pop_back();
  return out;
}

std::vector<float> EinsumReference(const std::string& equation, const std::vector<TensorData>& inputs,
                                   const TensorType& out_type) {
  return RunEinsum(equation, inputs, out_type, true);
}

struct EinsumCase {
  std::string equation;
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> out_dims;
};

TEST(EinsumOps, MatMulRewritesAndLoopsMatchThePlainLoop) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const std::vector<EinsumCase> cases = {
      {"bij,bjk->bik", {{3, 5, 7}, {3, 7, 9}}, {3, 5, 9}},
      {"bhid,bhjd->bhij", {{2, 3, 17, 8}, {2, 3, 19, 8}}, {2, 3, 17, 19}},
      {"bhij,bhjd->bhid", {{2, 3, 17, 19}, {2, 3, 19, 8}}, {2, 3, 17, 8}},
      {"ij,jk", {{4, 6}, {6, 5}}, {4, 5}},
      {"ij->ji", {{4, 6}}, {6, 4}},
      {"ii->i", {{5, 5}}, {5}},
      {"ii", {{5, 5}}, {}},
      {"i,i->", {{7}, {7}}, {}},
      {"i,j->ij", {{3}, {4}}, {3, 4}},
      {"ij->", {{3, 4}}, {}},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}, {2, 5, 3, 6}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, {2, 4}},
      {"kij,kjl->lik", {{3, 4, 5}, {3, 5, 2}}, {2, 4, 3}},
      {"ij,kj->ik", {{4, 9}, {6, 9}}, {4, 6}},
      {"bii->bi", {{2, 3, 3}}, {2, 3}},
  };
  for (const EinsumCase& c : cases) {
    std::vector<TensorData> inputs;
    for (const auto& d : c.dims) inputs.push_back(RandomF32(d, &rng));
    const std::vector<float> want = EinsumReference(c.equation, inputs, TensorType{DType::kF32, c.out_dims});
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      cpu::TensorOpRun run;
      run.op_type = "Einsum";
      run.attrs.SetString("equation", c.equation);
      for (const TensorData& t : inputs) run.inputs.push_back(t);
      run.pool = p;
      auto out = cpu::RunTensorOp(run);
      ASSERT_TRUE(out.ok()) << c.equation << ": " << out.status().message();
      EXPECT_EQ((*out)[0].type().dims, c.out_dims) << c.equation;
      ExpectNear((*out)[0], want, 64, c.equation);
    }
  }
}

TEST(EinsumOps, ConstantOperandsArePackedAtBindTime) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  struct Case {
    std::string equation;
    std::vector<std::vector<int64_t>> dims;
    std::vector<int64_t> out;
    std::vector<bool> constant;
  };
  const std::vector<Case> cases = {
      {"bld,dh->blh", {{2, 7, 24}, {24, 19}}, {2, 7, 19}, {false, true}},
      {"dh,bld->blh", {{24, 19}, {2, 7, 24}}, {2, 7, 19}, {true, false}},  // the constant is operand 0
      {"bld,hd->bhl", {{2, 7, 24}, {19, 24}}, {2, 19, 7}, {false, true}},  // transposed, output permuted
      {"ij,jk->ik", {{5, 6}, {6, 4}}, {5, 4}, {true, true}},
  };
  for (const Case& c : cases) {
    std::vector<TensorData> inputs;
    for (const auto& d : c.dims) inputs.push_back(RandomF32(d, &rng));
    const TensorType out{DType::kF32, c.out};
    const std::vector<float> want = RunEinsum(c.equation, inputs, out, true);
    std::string impl;
    const std::vector<float> got = RunEinsum(c.equation, inputs, out, false, c.constant, &pool, &impl);
    EXPECT_NE(impl.find("packed-weights"), std::string::npos) << c.equation << ": " << impl;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << c.equation << " " << i;
  }
}

TEST(EinsumOps, PlainLoopComputesKnownValues) {
  const TensorData a = TensorData::FromValues<float>(DType::kF32, {2, 2}, {1, 2, 3, 4});
  const TensorData b = TensorData::FromValues<float>(DType::kF32, {2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(EinsumReference("ij,jk->ik", {a, b}, {DType::kF32, {2, 2}}),
            (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(EinsumReference("ii->i", {a}, {DType::kF32, {2}}), (std::vector<float>{1, 4}));
  EXPECT_EQ(EinsumReference("ij->ji", {a}, {DType::kF32, {2, 2}}), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(EinsumReference("ij,ij->", {a, b}, {DType::kF32, {}}), (std::vector<float>{70}));
}

TEST(EinsumOps, DoubleRunsThePlainLoop) {
  cpu::TensorOpRun run;
  run.op_type = "Einsum";
  run.attrs.SetString("equation", "ij,jk->ik");
  run.inputs = {TensorData::FromValues<double>(DType::kF64, {1, 2}, {1, 2}),
                TensorData::FromValues<double>(DType::kF64, {2, 1}, {3, 4})};
  auto out = cpu::RunTensorOp(run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].As<double>()[0], 11.0);
}

TEST(EinsumOps, BadEquationsNameTheNode) {
  std::mt19937 rng(1);
  for (const std::string& eq : std::vector<std::string>{"ij,jk->ik", "ij->k", "i.j->i", "ij,jk", "i2->i"}) {
    cpu::TensorOpRun run;
    run.op_type = "Einsum";
    run.node = "mix";
    run.attrs.SetString("equation", eq);
    run.inputs = {RandomF32({2, 3}, &rng)};
    if (eq == "ij,jk") run.inputs.push_back(RandomF32({4, 5}, &rng));
    auto out = cpu::RunTensorOp(run);
    ASSERT_FALSE(out.ok()) << eq;
    EXPECT_NE(out.status().message().find("Einsum mix"), std::string::npos) << out.status().message();
  }
}

}  // namespace matmul_ops_tests
}  // namespace kiln

namespace kiln {
namespace matmul_ops_tests {

cpu::TensorKernelArgs ArgsFor(const char* op, const AttributeMap* attrs, std::vector<TensorType> inputs,
                              std::vector<const TensorData*> constants) {
  cpu::TensorKernelArgs args;
  args.op_type = op;
  args.node = "n";
  args.attrs = attrs;
  args.inputs = std::move(inputs);
  args.present.assign(args.inputs.size(), true);
  args.constants = std::move(constants);
  return args;
}

TEST(MatMulOps, WeightsArePackedAtBindTimeAndEinsumBecomesAMatMul) {
  AttributeMap none;
  std::mt19937 rng(3);
  const TensorData w = RandomF32({64, 96}, &rng);
  auto packed =
      cpu::MakeTensorKernel(ArgsFor("MatMul", &none, {{DType::kF32, {197, 64}}, w.type()}, {nullptr, &w}));
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_NE(packed->impl.find("packed-weights"), std::string::npos) << packed->impl;
  EXPECT_EQ(packed->scratch_bytes, 0u);
  auto activations = cpu::MakeTensorKernel(
      ArgsFor("MatMul", &none, {{DType::kF32, {197, 64}}, w.type()}, {nullptr, nullptr}));
  ASSERT_TRUE(activations.ok());
  EXPECT_EQ(activations->impl.find("packed-weights"), std::string::npos) << activations->impl;
  EXPECT_GT(activations->scratch_bytes, 0u);

  AttributeMap eq;
  eq.SetString("equation", "bhid,bhjd->bhij");
  auto einsum = cpu::MakeTensorKernel(ArgsFor(
      "Einsum", &eq, {{DType::kF32, {1, 6, 197, 64}}, {DType::kF32, {1, 6, 197, 64}}}, {nullptr, nullptr}));
  ASSERT_TRUE(einsum.ok()) << einsum.status().message();
  EXPECT_NE(einsum->impl.find("batched-matmul"), std::string::npos) << einsum->impl;
  eq.SetString("equation", "bii->bi");
  auto diagonal = cpu::MakeTensorKernel(ArgsFor("Einsum", &eq, {{DType::kF32, {2, 3, 3}}}, {nullptr}));
  ASSERT_TRUE(diagonal.ok());
  EXPECT_EQ(diagonal->impl, "reference");
}

}  // namespace matmul_ops_tests
}  // namespace kiln
