// The quantized ops: ONNX's rounding (half to even, saturation), per-axis
// parameters, and the int8 GEMM path against the plain int32 loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/tensor_kernels/qmatmul_kernels.h"
#include "backend/cpu/tensor_kernels/run_tensor_op.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln {
namespace quant_ops_tests {

template <typename T>
std::vector<T> Values(const TensorData& t) {
  return std::vector<T>(t.As<T>(), t.As<T>() + t.type().ElementCount());
}

Expected<std::vector<TensorData>> RunOp(const std::string& op, std::vector<std::optional<TensorData>> inputs,
                                        bool constants = false, AttributeMap attrs = {},
                                        ThreadPool* pool = nullptr, int num_outputs = 1) {
  cpu::TensorOpRun run;
  run.op_type = op;
  run.node = "q";
  run.attrs = std::move(attrs);
  run.inputs = std::move(inputs);
  run.inputs_are_constants = constants;
  run.pool = pool;
  run.num_outputs = num_outputs;
  return cpu::RunTensorOp(run);
}

TensorData Scalar(float v) {
  return TensorData::FromValues<float>(DType::kF32, {}, {v});
}
TensorData U8(std::vector<int64_t> dims, std::vector<uint8_t> v) {
  return TensorData::FromValues<uint8_t>(DType::kU8, std::move(dims), v);
}
TensorData I8(std::vector<int64_t> dims, std::vector<int8_t> v) {
  return TensorData::FromValues<int8_t>(DType::kI8, std::move(dims), v);
}

TEST(QuantOps, QuantizeRoundsHalfToEvenAndSaturates) {
  const float inf = std::numeric_limits<float>::infinity();
  const TensorData x = TensorData::FromValues<float>(
      DType::kF32, {13},
      {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.f, -300.f, 3.49f, 126.5f, -127.5f, 1e30f, -inf, inf});
  auto u = RunOp("QuantizeLinear", {x, Scalar(1.0f)});
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ((*u)[0].type().dtype, DType::kU8);
  EXPECT_EQ(Values<uint8_t>((*u)[0]), (std::vector<uint8_t>{0, 2, 2, 0, 0, 255, 0, 3, 126, 0, 255, 0, 255}));
  auto s = RunOp("QuantizeLinear", {x, Scalar(1.0f), I8({}, {0})});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(Values<int8_t>((*s)[0]),
            (std::vector<int8_t>{0, 2, 2, 0, -2, 127, -128, 3, 126, -128, 127, -128, 127}));
  auto z = RunOp("QuantizeLinear", {x, Scalar(2.0f), U8({}, {128})});
  ASSERT_TRUE(z.ok());
  // x / 2 = 0.25 0.75 1.25 -0.25 -0.75 150 -150 1.745 63.25 -63.75 ... -> 0 1 1 0 -1 150 -150 2 63 -64, +
  // 128.
  EXPECT_EQ(Values<uint8_t>((*z)[0]),
            (std::vector<uint8_t>{128, 129, 129, 128, 127, 255, 0, 130, 191, 64, 255, 0, 255}));
}

TEST(QuantOps, PerAxisQuantizeAndDequantize) {
  // x [2, 3, 2], per-channel along axis 1.
  std::vector<float> xv;
  for (int i = 0; i < 12; ++i) xv.push_back(static_cast<float>(i) - 5.3f);
  const TensorData x = TensorData::FromValues<float>(DType::kF32, {2, 3, 2}, xv);
  const TensorData scale = TensorData::FromValues<float>(DType::kF32, {3}, {0.5f, 1.0f, 0.25f});
  const TensorData zp = I8({3}, {-3, 0, 7});
  auto q = RunOp("QuantizeLinear", {x, scale, zp});
  ASSERT_TRUE(q.ok()) << q.status().message();
  const float sc[3] = {0.5f, 1.0f, 0.25f};
  const int zps[3] = {-3, 0, 7};
  std::vector<int8_t> want;
  for (int i = 0; i < 12; ++i) {
    const int c = (i / 2) % 3;
    float v = std::nearbyint(xv[static_cast<size_t>(i)] / sc[c]) + static_cast<float>(zps[c]);
    want.push_back(static_cast<int8_t>(std::max(-128.0f, std::min(127.0f, v))));
  }
  EXPECT_EQ(Values<int8_t>((*q)[0]), want);
  auto d = RunOp("DequantizeLinear", {(*q)[0], scale, zp});
  ASSERT_TRUE(d.ok()) << d.status().message();
  const std::vector<float> back = Values<float>((*d)[0]);
  for (int i = 0; i < 12; ++i) {
    const int c = (i / 2) % 3;
    EXPECT_FLOAT_EQ(back[static_cast<size_t>(i)],
                    static_cast<float>(want[static_cast<size_t>(i)] - zps[c]) * sc[c]);
  }
  // A negative axis names the same axis.
  AttributeMap axis;
  axis.SetInt("axis", -2);
  auto q2 = RunOp("QuantizeLinear", {x, scale, zp}, false, axis);
  ASSERT_TRUE(q2.ok());
  EXPECT_EQ(Values<int8_t>((*q2)[0]), want);
}

TEST(QuantOps, PerAxisSplitsOverThreadsAtAnyElement) {
  // [3, 5, 7001]: thread ranges end inside channels.
  ThreadPool pool(2);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> xv(3 * 5 * 7001);
  for (float& v : xv) v = dist(rng);
  xv[5] = std::numeric_limits<float>::quiet_NaN();
  const TensorData x = TensorData::FromValues<float>(DType::kF32, {3, 5, 7001}, xv);
  const std::vector<float> sc = {0.01f, 0.02f, 0.03f, 0.015f, 0.025f};
  const TensorData scale = TensorData::FromValues<float>(DType::kF32, {5}, sc);
  const TensorData zp = U8({5}, {0, 128, 100, 30, 255});
  auto q = RunOp("QuantizeLinear", {x, scale, zp}, false, {}, &pool);
  ASSERT_TRUE(q.ok()) << q.status().message();
  auto d = RunOp("DequantizeLinear", {(*q)[0], scale, zp}, false, {}, &pool);
  ASSERT_TRUE(d.ok()) << d.status().message();
  const int zps[5] = {0, 128, 100, 30, 255};
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 7001) % 5;
    const float v = std::isnan(xv[i]) ? 0.0f : std::nearbyint(xv[i] / sc[c]);
    const int want = static_cast<int>(std::max(0.0f, std::min(255.0f, v + static_cast<float>(zps[c]))));
    ASSERT_EQ((*q)[0].As<uint8_t>()[i], want) << i;
    ASSERT_EQ((*d)[0].As<float>()[i], static_cast<float>(want - zps[c]) * sc[c]) << i;
  }
}

TEST(QuantOps, ScaleOfTheWrongLengthIsAnError) {
  const TensorData x = TensorData::FromValues<float>(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto q = RunOp("QuantizeLinear", {x, TensorData::FromValues<float>(DType::kF32, {2}, {1, 1})});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("QuantizeLinear q"), std::string::npos) << q.status().message();
}

TEST(QuantOps, DynamicQuantizeMatchesTheOnnxExample) {
  const TensorData x = TensorData::FromValues<float>(DType::kF32, {6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  auto out = RunOp("DynamicQuantizeLinear", {x}, false, {}, nullptr, 3);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_NEAR((*out)[1].As<float>()[0], 5.0f / 255.0f, 1e-7f);
  EXPECT_EQ((*out)[2].As<uint8_t>()[0], 153);
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
}

// Random u8 or i8 values.
TensorData RandomQ(DType t, std::vector<int64_t> dims, std::mt19937* rng, int lo = -128, int hi = 255) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const int a = t == DType::kU8 ? std::max(lo, 0) : std::max(lo, -128);
  const int b = t == DType::kU8 ? std::min(hi, 255) : std::min(hi, 127);
  std::uniform_int_distribution<int> dist(a, b);
  std::string bytes(static_cast<size_t>(n), '\0');
  for (char& c : bytes) c = static_cast<char>(dist(*rng));
  return TensorData(TensorType{t, std::move(dims)}, std::make_shared<std::string>(std::move(bytes)));
}

int32_t At(const TensorData& t, int64_t i) {
  return t.type().dtype == DType::kU8 ? t.As<uint8_t>()[i] : t.As<int8_t>()[i];
}

// The int32 products (a - a_zp)(b - b_zp), computed here from the definition.
std::vector<int32_t> NaiveInt(const TensorData& a, const TensorData& b, const TensorData* az,
                              const TensorData* bz) {
  auto s = MatMulShapeOf("t", "t", a.type().dims, b.type().dims).value();
  std::vector<int32_t> out;
  for (int64_t i = 0; i < s.batch; ++i) {
    for (int64_t r = 0; r < s.m; ++r) {
      for (int64_t j = 0; j < s.n; ++j) {
        int32_t sum = 0;
        const int32_t azv = az ? At(*az, az->type().ElementCount() > 1 ? r : 0) : 0;
        const int32_t bzv = bz ? At(*bz, bz->type().ElementCount() > 1 ? j : 0) : 0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          sum += (At(a, s.a_index[i] * s.m * s.k + r * s.k + kk) - azv) *
                 (At(b, s.b_index[i] * s.k * s.n + kk * s.n + j) - bzv);
        }
        out.push_back(sum);
      }
    }
  }
  return out;
}

struct QCase {
  std::vector<int64_t> a, b;
  DType at, bt;
  bool per_row_a, per_col_b;
};

// The op on its plain int32 loops.
Expected<std::vector<TensorData>> RunLoops(const std::string& op,
                                           const std::vector<std::optional<TensorData>>& inputs,
                                           const TensorType& out) {
  AttributeMap none;
  cpu::TensorKernelArgs args;
  args.op_type = op;
  args.node = "q";
  args.attrs = &none;
  std::vector<const void*> ptrs;
  for (const auto& in : inputs) {
    args.inputs.push_back(in->type());
    args.present.push_back(true);
    args.constants.push_back(nullptr);
    ptrs.push_back(in->data());
  }
  args.outputs = {out};
  KILN_ASSIGN_OR_RETURN(cpu::TensorKernel k, cpu::MakeQMatMulReference(args));
  auto bytes = std::make_shared<std::string>(out.Bytes(), '\0');
  std::string scratch(k.scratch_bytes + 64, '\0');
  void* out_ptr = bytes->data();
  cpu::TensorCall call;
  call.inputs = ptrs.data();
  call.outputs = &out_ptr;
  call.scratch = reinterpret_cast<uint8_t*>(scratch.data() +
                                            (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64);
  KILN_RETURN_IF_ERROR(k.run(call));
  return std::vector<TensorData>{TensorData(out, bytes)};
}

// Whether the op with constant B runs on the int8 GEMM kernels.
bool TakesInt8Kernels(const std::string& op, const std::vector<TensorData>& inputs, DType out) {
  cpu::TensorKernelArgs args;
  AttributeMap none;
  args.op_type = op;
  args.node = "q";
  args.attrs = &none;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.inputs.push_back(inputs[i].type());
    args.present.push_back(true);
    args.constants.push_back(i == 0 ? nullptr : &inputs[i]);
  }
  args.outputs = {TensorType{out, {}}};
  auto k = cpu::MakeTensorKernel(args);
  return k.ok() && k->impl.find("kiln-int8") != std::string::npos;
}

const std::vector<QCase>& QCases() {
  static const std::vector<QCase> cases = {
      {{3, 5}, {5, 7}, DType::kU8, DType::kI8, false, false},
      {{17, 33}, {33, 19}, DType::kU8, DType::kU8, true, true},
      {{2, 9, 64}, {64, 40}, DType::kI8, DType::kI8, false, true},
      {{197, 384}, {384, 67}, DType::kU8, DType::kI8, false, false},
      {{1, 7}, {7, 16}, DType::kI8, DType::kU8, true, false},
      {{2, 3, 4, 6}, {3, 6, 5}, DType::kU8, DType::kI8, false, false},
      {{11}, {11, 3}, DType::kU8, DType::kI8, false, true},
      {{5, 1500}, {1500, 20}, DType::kU8, DType::kI8, false, false},  // K past exact float sums
  };
  return cases;
}

TEST(QuantOps, MatMulIntegerIsExactOnEveryPath) {
  std::mt19937 rng(21);
  ThreadPool pool(2);
  for (const QCase& c : QCases()) {
    auto s = MatMulShapeOf("t", "t", c.a, c.b).value();
    const TensorData a = RandomQ(c.at, c.a, &rng);
    // B's values within 127 of its zero point, so that the int8 kernels take it.
    const TensorData bz = RandomQ(c.bt, c.per_col_b ? std::vector<int64_t>{s.n} : std::vector<int64_t>{},
                                  &rng, c.bt == DType::kU8 ? 123 : -10, c.bt == DType::kU8 ? 128 : 10);
    const TensorData b =
        RandomQ(c.bt, c.b, &rng, c.bt == DType::kU8 ? 10 : -117, c.bt == DType::kU8 ? 245 : 117);
    const TensorData az =
        RandomQ(c.at, c.per_row_a ? std::vector<int64_t>{s.m} : std::vector<int64_t>{}, &rng);
    const std::vector<int32_t> want = NaiveInt(a, b, &az, &bz);
    // A batched B runs the loops; a 2-d one the int8 kernels.
    EXPECT_EQ(TakesInt8Kernels("MatMulInteger", {a, b, az, bz}, DType::kI32), c.b.size() == 2)
        << DimsToString(c.b);
    for (bool constant : {false, true}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        auto out = RunOp("MatMulInteger", {a, b, az, bz}, constant, {}, p);
        ASSERT_TRUE(out.ok()) << out.status().message();
        EXPECT_EQ((*out)[0].type().dims, s.out_dims);
        EXPECT_EQ(Values<int32_t>((*out)[0]), want)
            << "[" << DimsToString(c.a) << "] x [" << DimsToString(c.b) << "] constant " << constant;
      }
    }
    // No zero points at all.
    auto plain = RunOp("MatMulInteger", {a, b}, true);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(Values<int32_t>((*plain)[0]), NaiveInt(a, b, nullptr, nullptr));
  }
}

// `op` is a literal: the arguments keep a view of it.
cpu::TensorKernelArgs ArgsOf(const char* op, const std::vector<TensorData>& in,
                             std::vector<bool> constant, const AttributeMap* attrs) {
  cpu::TensorKernelArgs args;
  args.op_type = op;
  args.node = "q";
  args.attrs = attrs;
  for (size_t i = 0; i < in.size(); ++i) {
    args.inputs.push_back(in[i].type());
    args.present.push_back(true);
    args.constants.push_back(constant[i] ? &in[i] : nullptr);
  }
  return args;
}

TEST(QuantOps, ConstantInt8WeightsTakeTheInt8GemmKernels) {
  std::mt19937 rng(2);
  AttributeMap none;
  const TensorData a = RandomQ(DType::kU8, {4, 32}, &rng), b = RandomQ(DType::kI8, {32, 16}, &rng, -127, 127);
  // ArgsOf keeps pointers to the constants: they live in these vectors.
  const std::vector<TensorData> small = {a, b};
  auto args = ArgsOf("MatMulInteger", small, {false, true}, &none);
  args.outputs = {TensorType{DType::kI32, {4, 16}}};
  auto k = cpu::MakeTensorKernel(args);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_NE(k->impl.find("kiln-int8"), std::string::npos) << k->impl;
  // A long K runs in chunks whose sums stay exact.
  const TensorData a_long = RandomQ(DType::kU8, {4, 1500}, &rng),
                   b_long = RandomQ(DType::kI8, {1500, 16}, &rng, -127, 127);
  const std::vector<TensorData> long_inputs = {a_long, b_long};
  auto long_args = ArgsOf("MatMulInteger", long_inputs, {false, true}, &none);
  long_args.outputs = args.outputs;
  auto chunked = cpu::MakeTensorKernel(long_args);
  ASSERT_TRUE(chunked.ok());
  EXPECT_NE(chunked->impl.find("kiln-int8"), std::string::npos) << chunked->impl;
  // -128 does not fit the kernels' weights: the fp32 GEMM runs it.
  const TensorData wide = I8({32, 16}, std::vector<int8_t>(512, -128));
  const std::vector<TensorData> wide_inputs = {a, wide};
  auto wide_args = ArgsOf("MatMulInteger", wide_inputs, {false, true}, &none);
  wide_args.outputs = args.outputs;
  auto loops = cpu::MakeTensorKernel(wide_args);
  ASSERT_TRUE(loops.ok());
  EXPECT_NE(loops->impl.find("fp32-of-int8"), std::string::npos) << loops->impl;
}

TEST(QuantOps, QLinearMatMulFastPathMatchesTheLoopsWithinOneStep) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  for (const QCase& c : QCases()) {
    auto s = MatMulShapeOf("t", "t", c.a, c.b).value();
    const TensorData a = RandomQ(c.at, c.a, &rng);
    const TensorData b =
        RandomQ(c.bt, c.b, &rng, c.bt == DType::kU8 ? 10 : -117, c.bt == DType::kU8 ? 245 : 117);
    const TensorData az = RandomQ(c.at, {}, &rng);
    const TensorData bz = RandomQ(c.bt, c.per_col_b ? std::vector<int64_t>{s.n} : std::vector<int64_t>{},
                                  &rng, c.bt == DType::kU8 ? 123 : -10, c.bt == DType::kU8 ? 128 : 10);
    std::vector<float> bs;
    for (int64_t j = 0; j < (c.per_col_b ? s.n : 1); ++j)
      bs.push_back(0.001f * static_cast<float>(1 + j % 7));
    const TensorData b_scale = TensorData::FromValues<float>(
        DType::kF32, c.per_col_b ? std::vector<int64_t>{s.n} : std::vector<int64_t>{}, bs);
    const float a_scale = 0.02f;
    const DType yt = c.at;
    const TensorData yz = yt == DType::kU8 ? U8({}, {128}) : I8({}, {3});
    const std::vector<int32_t> acc = NaiveInt(a, b, &az, &bz);
    // y_scale puts the largest |real| near 100 steps: little saturation.
    double largest = 1e-6;
    for (size_t i = 0; i < acc.size(); ++i) {
      largest =
          std::max(largest, std::fabs(static_cast<double>(acc[i]) * a_scale * bs[c.per_col_b ? i % s.n : 0]));
    }
    const float y_scale = static_cast<float>(largest / 100);
    std::vector<std::optional<TensorData>> inputs = {a,  Scalar(a_scale), az, b, b_scale,
                                                     bz, Scalar(y_scale), yz};
    EXPECT_EQ(
        TakesInt8Kernels("QLinearMatMul", {a, Scalar(a_scale), az, b, b_scale, bz, Scalar(y_scale), yz}, yt),
        c.b.size() == 2)
        << DimsToString(c.b);
    auto ref = RunLoops("QLinearMatMul", inputs, TensorType{yt, s.out_dims});
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
      const int64_t j = i % s.n;
      const double real = static_cast<double>(acc[static_cast<size_t>(i)]) * a_scale *
                          bs[static_cast<size_t>(c.per_col_b ? j : 0)];
      const double q = std::nearbyint(real / y_scale) + At(yz, 0);
      const double want =
          std::max(yt == DType::kU8 ? 0.0 : -128.0, std::min(yt == DType::kU8 ? 255.0 : 127.0, q));
      ASSERT_NEAR(At((*ref)[0], i), want, 1.0) << i;
    }
    for (const auto& [constant, p] :
         std::vector<std::pair<bool, ThreadPool*>>{{true, nullptr}, {true, &pool}, {false, &pool}}) {
      auto fast = RunOp("QLinearMatMul", inputs, constant, {}, p);
      ASSERT_TRUE(fast.ok()) << fast.status().message();
      for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
        ASSERT_NEAR(At((*fast)[0], i), At((*ref)[0], i), 1)
            << "[" << DimsToString(c.a) << "] x [" << DimsToString(c.b) << "] " << i;
      }
    }
  }
}

TEST(QuantOps, FusedQLinearMatMulGivesTheDequantizedProductPlusBias) {
  std::mt19937 rng(4);
  const TensorData a = RandomQ(DType::kU8, {5, 24}, &rng), b = RandomQ(DType::kI8, {24, 18}, &rng, -127, 127);
  std::vector<float> bias_v;
  for (int j = 0; j < 18; ++j) bias_v.push_back(0.1f * static_cast<float>(j) - 0.5f);
  const TensorData bias = TensorData::FromValues<float>(DType::kF32, {18}, bias_v);
  const TensorData az = U8({}, {120}), bz = I8({}, {0});
  for (bool constant : {false, true}) {
    auto out = RunOp("kiln.QLinearMatMul", {a, Scalar(0.05f), az, b, Scalar(0.01f), bz, bias}, constant);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].type(), (TensorType{DType::kF32, {5, 18}}));
    const std::vector<int32_t> acc = NaiveInt(a, b, &az, &bz);
    for (size_t i = 0; i < acc.size(); ++i) {
      const float want = static_cast<float>(acc[i]) * 0.05f * 0.01f + bias_v[i % 18];
      ASSERT_NEAR((*out)[0].As<float>()[i], want, 1e-4f * (1.0f + std::fabs(want))) << i;
    }
  }
}

TEST(QuantOps, FusedQLinearMatMulRequantizesWithTheBias) {
  std::mt19937 rng(12);
  const TensorData a = RandomQ(DType::kI8, {2, 9, 40}, &rng),
                   b = RandomQ(DType::kI8, {40, 21}, &rng, -127, 127);
  std::vector<float> bias_v;
  for (int j = 0; j < 21; ++j) bias_v.push_back(0.3f * static_cast<float>(j % 5) - 0.6f);
  const TensorData bias = TensorData::FromValues<float>(DType::kF32, {21}, bias_v);
  const TensorData az = I8({}, {-3}), bz = I8({}, {0}), yz = I8({}, {5});
  auto real = RunOp("kiln.QLinearMatMul", {a, Scalar(0.05f), az, b, Scalar(0.01f), bz, bias});
  ASSERT_TRUE(real.ok()) << real.status().message();
  auto want = RunOp("QuantizeLinear", {(*real)[0], Scalar(0.04f), yz});
  ASSERT_TRUE(want.ok());
  for (bool constant : {false, true}) {
    auto q = RunOp("kiln.QLinearMatMul",
                   {a, Scalar(0.05f), az, b, Scalar(0.01f), bz, bias, Scalar(0.04f), yz}, constant);
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ((*q)[0].type(), (TensorType{DType::kI8, {2, 9, 21}}));
    for (int64_t i = 0; i < 2 * 9 * 21; ++i) ASSERT_NEAR(At((*q)[0], i), At((*want)[0], i), 1) << i;
  }
}

TEST(QuantOps, ConvIntegerMatchesTheOnnxExample) {
  const TensorData x = U8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  const TensorData w = U8({1, 1, 2, 2}, {1, 1, 1, 1});
  auto out = RunOp("ConvInteger", {x, w, U8({}, {1})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].type(), (TensorType{DType::kI32, {1, 1, 2, 2}}));
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{12, 16, 24, 28}));
  AttributeMap pads;
  pads.SetInts("pads", {1, 1, 1, 1});
  auto padded = RunOp("ConvInteger", {x, w, U8({}, {1})}, false, pads);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(Values<int32_t>((*padded)[0]),
            (std::vector<int32_t>{1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9}));
}

TEST(QuantOps, QLinearConvRequantizesTheIntegerConvolution) {
  std::mt19937 rng(6);
  // Two groups, per-channel weight scales, stride 2, bias.
  const TensorData x = RandomQ(DType::kU8, {1, 4, 7, 6}, &rng);
  const TensorData w = RandomQ(DType::kI8, {6, 2, 3, 3}, &rng, -127, 127);
  const TensorData w_scale =
      TensorData::FromValues<float>(DType::kF32, {6}, {0.01f, 0.02f, 0.015f, 0.01f, 0.03f, 0.02f});
  const TensorData bias = TensorData::FromValues<int32_t>(DType::kI32, {6}, {100, -200, 0, 50, 1000, -7});
  AttributeMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 1, 1});
  const TensorData x_zp = U8({}, {128}), w_zp = I8({6}, {0, 0, 0, 0, 0, 0});
  auto ci = RunOp("ConvInteger", {x, w, x_zp, w_zp}, false, attrs);
  ASSERT_TRUE(ci.ok()) << ci.status().message();
  auto q = RunOp("QLinearConv", {x, Scalar(0.1f), x_zp, w, w_scale, w_zp, Scalar(0.5f), U8({}, {100}), bias},
                 false, attrs);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ((*q)[0].type(), (TensorType{DType::kU8, {1, 6, 4, 3}}));
  const int64_t per_channel = 12;
  for (int64_t i = 0; i < 6 * per_channel; ++i) {
    const int64_t oc = i / per_channel;
    const double real = (static_cast<double>((*ci)[0].As<int32_t>()[i]) + bias.As<int32_t>()[oc]) * 0.1 *
                        w_scale.As<float>()[oc];
    const double want = std::max(0.0, std::min(255.0, std::nearbyint(real / 0.5) + 100));
    ASSERT_NEAR((*q)[0].As<uint8_t>()[i], want, 1.0) << i;
  }
}

struct QConvCase {
  std::vector<int64_t> x, w;
  DType xt, wt;
  int64_t group;
  std::vector<int64_t> strides, pads, dilations;
};

TEST(QuantOps, QuantizedConvolutionsOnTheInt8KernelsMatchTheLoops) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  const std::vector<QConvCase> cases = {
      {{1, 3, 9, 11}, {8, 3, 3, 3}, DType::kU8, DType::kI8, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {{2, 4, 10, 7}, {6, 2, 3, 2}, DType::kU8, DType::kU8, 2, {2, 1}, {1, 0, 2, 1}, {1, 2}},
      {{1, 6, 8, 8}, {6, 1, 3, 3}, DType::kI8, DType::kI8, 6, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // depthwise
      {{1, 5, 13}, {7, 5, 4}, DType::kU8, DType::kI8, 1, {3}, {2, 1}, {1}},                   // 1-d
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 3}, DType::kU8, DType::kI8, 1, {1, 2, 1}, {0, 1, 1, 1, 0, 1}, {1, 1, 2}},
      {{1, 130, 5, 5}, {17, 130, 3, 3}, DType::kU8, DType::kI8, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // K past
                                                                                                   // 1024
  };
  for (const QConvCase& c : cases) {
    AttributeMap attrs;
    attrs.SetInt("group", c.group);
    attrs.SetInts("strides", c.strides);
    attrs.SetInts("pads", c.pads);
    attrs.SetInts("dilations", c.dilations);
    const int64_t m = c.w[0];
    const TensorData x = RandomQ(c.xt, c.x, &rng);
    // Weights minus zero points within [-127, 127], as the int8 kernels take them.
    const bool wu = c.wt == DType::kU8;
    const TensorData w_zp = RandomQ(c.wt, {m}, &rng, wu ? 123 : -5, wu ? 128 : 5);
    const TensorData w = RandomQ(c.wt, c.w, &rng, wu ? 10 : -122, wu ? 245 : 122);
    const TensorData x_zp = RandomQ(c.xt, {}, &rng);
    const std::string what = "x [" + DimsToString(c.x) + "] w [" + DimsToString(c.w) + "]";
    {
      const std::vector<TensorData> kept = {x, w, x_zp, w_zp};
      auto args = ArgsOf("ConvInteger", kept, {false, true, false, true}, &attrs);
      args.outputs = {TensorType{DType::kI32, {}}};  // only the dtype matters to the factory
      auto kernel = cpu::MakeTensorKernel(args);
      ASSERT_TRUE(kernel.ok()) << kernel.status().message();
      EXPECT_NE(kernel->impl.find("kiln-int8"), std::string::npos) << kernel->impl;
    }
    auto loops = RunOp("ConvInteger", {x, w, x_zp, w_zp}, false, attrs);
    ASSERT_TRUE(loops.ok()) << loops.status().message();
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto fast = RunOp("ConvInteger", {x, w, x_zp, w_zp}, true, attrs, p);
      ASSERT_TRUE(fast.ok()) << fast.status().message();
      ASSERT_EQ(Values<int32_t>((*fast)[0]), Values<int32_t>((*loops)[0])) << what;
    }
    // QLinearConv with per-channel scales and a bias, y_scale near the data's range.
    std::vector<float> ws;
    std::vector<int32_t> bias;
    for (int64_t j = 0; j < m; ++j) {
      ws.push_back(0.002f * static_cast<float>(1 + j % 5));
      bias.push_back(static_cast<int32_t>(j * 37 % 200) - 100);
    }
    const TensorData w_scale = TensorData::FromValues<float>(DType::kF32, {m}, ws);
    const TensorData b = TensorData::FromValues<int32_t>(DType::kI32, {m}, bias);
    int32_t largest = 1;
    for (int32_t v : Values<int32_t>((*loops)[0])) largest = std::max(largest, std::abs(v));
    const float y_scale = 0.05f * 0.01f * static_cast<float>(largest) / 100.0f;
    const TensorData y_zp = c.xt == DType::kU8 ? U8({}, {128}) : I8({}, {0});
    std::vector<std::optional<TensorData>> inputs = {x,    Scalar(0.05f),   x_zp, w, w_scale,
                                                     w_zp, Scalar(y_scale), y_zp, b};
    auto ref = RunOp("QLinearConv", inputs, false, attrs);
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto fast = RunOp("QLinearConv", inputs, true, attrs, p);
      ASSERT_TRUE(fast.ok()) << fast.status().message();
      for (int64_t i = 0; i < (*ref)[0].type().ElementCount(); ++i) {
        ASSERT_NEAR(At((*fast)[0], i), At((*ref)[0], i), 1) << what << " " << i;
      }
    }
  }
}

TEST(QuantOps, MismatchedInnerDimensionNamesTheNode) {
  std::mt19937 rng(1);
  auto out = RunOp("MatMulInteger", {RandomQ(DType::kU8, {2, 3}, &rng), RandomQ(DType::kU8, {4, 2}, &rng)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("MatMulInteger q"), std::string::npos) << out.status().message();
}

}  // namespace quant_ops_tests
}  // namespace kiln
