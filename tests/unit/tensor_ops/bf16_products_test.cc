// The bf16 products (compute_dtype = "bf16"): Conv, kiln.FusedConv, MatMul,
// kiln.FusedMatMul and Gemm on oneDNN's bf16 kernels against the plain fp32
// loops run on inputs rounded to bf16 the same way (to nearest even): the
// products of two bf16 values are exact in fp32, so the two differ only by
// the order of the fp32 sums. Skipped where the CPU has no native bf16
// products (AVX-512 BF16 or AMX; KILN_ISA=avx2 turns them off).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/bf16_compute.h"
#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "unit/tensor_ops/conv_test_util.h"

namespace kiln {
namespace bf16_products_tests {

using conv_test::RandomTensor;

constexpr const char* kNoBf16 =
    "this CPU multiplies no bf16 natively (AVX-512 BF16 or AMX), or KILN_ISA caps it";

// `t` with every element rounded to bf16 (nearest even) and back.
TensorData RoundedToBf16(const TensorData& t) {
  std::vector<float> v(t.As<float>(), t.As<float>() + t.type().ElementCount());
  for (float& x : v) x = Bf16ToF32(F32ToBf16(x));
  return TensorData::FromValues<float>(DType::kF32, t.type().dims, v);
}

// max |got - want| <= 1e-5 * max(1, max |want|): fp32 sums in another order.
void ExpectBf16Close(const TensorData& got, const TensorData& want, const std::string& what) {
  ASSERT_EQ(got.type().dims, want.type().dims) << what;
  conv_test::ExpectClose(got.As<float>(), want.As<float>(), want.type().ElementCount(), 1e-5f, what);
}

// The op on `inputs` with compute_dtype = bf16 (weights as compile-time
// constants unless `constants` is false), and the fp32 reference loops on the
// rounded inputs (`rounded`: which inputs the product reads in bf16).
struct Bf16Case {
  std::string op_type;
  AttributeMap attrs;
  std::vector<TensorData> inputs;
  std::vector<bool> rounded;
  bool constants = true;
};

void CheckAgainstRoundedReference(const Bf16Case& c, ThreadPool* pool) {
  SCOPED_TRACE(c.op_type + " " + c.attrs.ToString() + (c.constants ? " constant weights" : " run-time B"));
  cpu::TensorOpRun run;
  run.op_type = c.op_type;
  run.attrs = c.attrs;
  run.attrs.SetString("compute_dtype", "bf16");
  for (const TensorData& t : c.inputs) run.inputs.push_back(t);
  run.inputs_are_constants = c.constants;
  run.pool = pool;
  auto got = cpu::RunTensorOp(run);
  ASSERT_TRUE(got.ok()) << got.status().ToString();

  conv_test::ScopedConvImpl reference("reference");
  cpu::TensorOpRun ref;
  ref.op_type = c.op_type;
  ref.attrs = c.attrs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ref.inputs.push_back(c.rounded[i] ? RoundedToBf16(c.inputs[i]) : c.inputs[i]);
  }
  auto want = cpu::RunTensorOp(ref);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ExpectBf16Close((*got)[0], (*want)[0], c.op_type);
}

// Which implementation a node's kernel runs.
std::string ImplOf(const std::string& op_type, const AttributeMap& attrs,
                   const std::vector<TensorData>& inputs, const std::vector<TensorType>& outputs) {
  cpu::TensorKernelArgs args;
  args.op_type = op_type;
  args.node = "n";
  args.attrs = &attrs;
  for (const TensorData& t : inputs) {
    args.inputs.push_back(t.type());
    args.present.push_back(true);
    args.constants.push_back(&t);
  }
  args.outputs = outputs;
  auto k = cpu::MakeTensorKernel(args);
  return k.ok() ? k->impl : "error: " + k.status().ToString();
}

TEST(Bf16Products, ConvolutionsMatchTheRoundedReference) {
  if (!cpu::CpuMultipliesBf16()) GTEST_SKIP() << kNoBf16;
  ThreadPool pool(2);
  struct ConvShape {
    int64_t c, m;
    std::vector<int64_t> hw, kernel, strides, pads;
  };
  const std::vector<ConvShape> shapes = {
      {16, 32, {14, 13}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {32, 48, {9, 9}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {3, 16, {32, 30}, {7, 7}, {2, 2}, {3, 3, 3, 3}},   // a stem: fewer than 16 input channels
      {24, 20, {11, 10}, {3, 3}, {2, 2}, {1, 0, 1, 2}},  // channels not multiples of 16
  };
  uint32_t seed = 1;
  for (const ConvShape& s : shapes) {
    AttributeMap attrs;
    attrs.SetInts("strides", s.strides);
    attrs.SetInts("pads", s.pads);
    Bf16Case c{"Conv",
               attrs,
               {RandomTensor({1, s.c, s.hw[0], s.hw[1]}, seed),
                RandomTensor({s.m, s.c, s.kernel[0], s.kernel[1]}, seed + 1), RandomTensor({s.m}, seed + 2)},
               {true, true, false}};
    seed += 3;
    CheckAgainstRoundedReference(c, &pool);
  }
  // A 1-d convolution.
  CheckAgainstRoundedReference(
      {"Conv", AttributeMap(), {RandomTensor({2, 16, 21}, 5), RandomTensor({8, 16, 3}, 6)}, {true, true}},
      &pool);
}

TEST(Bf16Products, FusedConvEpiloguesStayFp32) {
  if (!cpu::CpuMultipliesBf16()) GTEST_SKIP() << kNoBf16;
  ThreadPool pool(2);
  const TensorData x = RandomTensor({1, 16, 10, 12}, 11), w = RandomTensor({32, 16, 3, 3}, 12),
                   b = RandomTensor({32}, 13), residual = RandomTensor({1, 32, 10, 12}, 14);
  for (const char* act : {"Relu", "Silu", "HardSigmoid"}) {
    for (int before = 0; before < 2; ++before) {
      AttributeMap attrs;
      attrs.SetInts("pads", {1, 1, 1, 1});
      attrs.SetString("activation", act);
      attrs.SetInt("residual_before_activation", before);
      CheckAgainstRoundedReference({"kiln.FusedConv", attrs, {x, w, b, residual}, {true, true, false, false}},
                                   &pool);
    }
  }
  AttributeMap attrs;
  attrs.SetString("compute_dtype", "bf16");
  EXPECT_NE(ImplOf("Conv", attrs, {x, w}, {TensorType{DType::kF32, {1, 32, 8, 10}}}).find("bf16"),
            std::string::npos);
}

// NCHW <-> the layout named (nhwc or nchw16c; c a multiple of 16).
std::vector<float> ToLayout(const float* nchw, int64_t n, int64_t c, int64_t hw, const std::string& layout,
                            bool inverse) {
  std::vector<float> out(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t plain = (i * c + ch) * hw + p;
        const int64_t laid =
            layout == "nhwc" ? (i * hw + p) * c + ch : (((i * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16);
        (inverse ? out[static_cast<size_t>(plain)] : out[static_cast<size_t>(laid)]) =
            nchw[inverse ? laid : plain];
      }
    }
  }
  return out;
}

// The layout stage's activation layouts (activation_layout) in bf16.
TEST(Bf16Products, BlockedAndChannelsLastConvolutions) {
  if (!cpu::CpuMultipliesBf16()) GTEST_SKIP() << kNoBf16;
  const int64_t n = 2, c = 16, m = 32, h = 9, w = 10;
  const TensorData x = RandomTensor({n, c, h, w}, 31), wt = RandomTensor({m, c, 3, 3}, 32),
                   b = RandomTensor({m}, 33), residual = RandomTensor({n, m, h, w}, 34);
  AttributeMap attrs;
  attrs.SetInts("pads", {1, 1, 1, 1});
  attrs.SetString("activation", "Silu");
  TensorData want;
  {
    conv_test::ScopedConvImpl reference("reference");
    cpu::TensorOpRun ref;
    ref.op_type = "kiln.FusedConv";
    ref.attrs = attrs;
    ref.inputs = {RoundedToBf16(x), RoundedToBf16(wt), b, residual};
    auto out = cpu::RunTensorOp(ref);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want = (*out)[0];
  }
  for (const std::string layout : {"nchw16c", "nhwc"}) {
    SCOPED_TRACE(layout);
    cpu::TensorOpRun run;
    run.op_type = "kiln.FusedConv";
    run.attrs = attrs;
    run.attrs.SetString("activation_layout", layout);
    run.attrs.SetString("compute_dtype", "bf16");
    run.inputs = {
        conv_test::Floats({n, c, h, w}, ToLayout(x.As<float>(), n, c, h * w, layout, false)), wt, b,
        conv_test::Floats({n, m, h, w}, ToLayout(residual.As<float>(), n, m, h * w, layout, false))};
    run.inputs_are_constants = true;
    auto out = cpu::RunTensorOp(run);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> got = ToLayout((*out)[0].As<float>(), n, m, h * w, layout, true);
    conv_test::ExpectClose(got.data(), want.As<float>(), want.type().ElementCount(), 1e-5f, layout);
  }
}

TEST(Bf16Products, MatMulsMatchTheRoundedReference) {
  if (!cpu::CpuMultipliesBf16()) GTEST_SKIP() << kNoBf16;
  ThreadPool pool(2);
  // A weight shared by a batch, a single row, odd sizes.
  CheckAgainstRoundedReference(
      {"MatMul", {}, {RandomTensor({2, 7, 70}, 1), RandomTensor({70, 33}, 2)}, {true, true}}, &pool);
  CheckAgainstRoundedReference(
      {"MatMul", {}, {RandomTensor({1, 512}, 3), RandomTensor({512, 100}, 4)}, {true, true}}, &pool);
  // Two run-time operands, one B per output matrix (attention's products).
  CheckAgainstRoundedReference(
      {"MatMul", {}, {RandomTensor({2, 3, 17, 64}, 5), RandomTensor({2, 3, 64, 17}, 6)}, {true, true}, false},
      &pool);
  // kiln.FusedMatMul: B given transposed, a bias row.
  AttributeMap fused;
  fused.SetInt("trans_b", 1);
  CheckAgainstRoundedReference({"kiln.FusedMatMul",
                                fused,
                                {RandomTensor({5, 40}, 7), RandomTensor({24, 40}, 8), RandomTensor({24}, 9)},
                                {true, true, false}},
                               &pool);
  // An empty sum (k = 0) still writes zeros.
  {
    cpu::TensorOpRun run;
    run.op_type = "MatMul";
    run.attrs.SetString("compute_dtype", "bf16");
    run.inputs = {TensorData::Zeros(TensorType{DType::kF32, {3, 0}}),
                  TensorData::Zeros(TensorType{DType::kF32, {0, 4}})};
    run.inputs_are_constants = true;
    auto out = cpu::RunTensorOp(run);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ((*out)[0].type().ElementCount(), 12);
    for (int i = 0; i < 12; ++i) EXPECT_EQ((*out)[0].As<float>()[i], 0.0f);
  }
  AttributeMap attrs;
  attrs.SetString("compute_dtype", "bf16");
  EXPECT_NE(ImplOf("MatMul", attrs, {RandomTensor({4, 8}, 1), RandomTensor({8, 16}, 2)},
                   {TensorType{DType::kF32, {4, 16}}})
                .find("bf16"),
            std::string::npos);
}

TEST(Bf16Products, GemmsMatchTheRoundedReference) {
  if (!cpu::CpuMultipliesBf16()) GTEST_SKIP() << kNoBf16;
  ThreadPool pool(2);
  struct GemmForm {
    int trans_a, trans_b;
    double alpha, beta;
    std::vector<int64_t> c;  // empty: no C
  };
  const int64_t m = 9, k = 48, n = 20;
  for (const GemmForm& f : std::vector<GemmForm>{{0, 1, 1.0, 1.0, {n}},
                                                 {1, 0, 1.0, 1.0, {}},
                                                 {0, 0, 1.0, 0.5, {m, n}},
                                                 {1, 1, 1.0, 2.0, {m, 1}},
                                                 {0, 1, 1.0, 1.0, {1, n}}}) {
    AttributeMap attrs;
    attrs.SetInt("transA", f.trans_a);
    attrs.SetInt("transB", f.trans_b);
    attrs.SetFloat("alpha", f.alpha);
    attrs.SetFloat("beta", f.beta);
    Bf16Case c{"Gemm",
               attrs,
               {RandomTensor(f.trans_a ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, 21),
                RandomTensor(f.trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 22)},
               {true, true}};
    if (!f.c.empty()) {
      c.inputs.push_back(RandomTensor(f.c, 23));
      c.rounded.push_back(false);
    }
    CheckAgainstRoundedReference(c, &pool);
  }
}

TEST(Bf16Products, AnUnknownComputeDtypeIsAnError) {
  AttributeMap attrs;
  attrs.SetString("compute_dtype", "f8");
  cpu::TensorOpRun run;
  run.op_type = "MatMul";
  run.attrs = attrs;
  run.inputs = {RandomTensor({2, 3}, 1), RandomTensor({3, 4}, 2)};
  auto out = cpu::RunTensorOp(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("compute_dtype 'f8'"), std::string::npos) << out.status().message();
}

}  // namespace bf16_products_tests
}  // namespace kiln
