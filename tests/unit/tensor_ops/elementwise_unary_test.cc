// The unary elementwise ops through RunTensorOp: values against libm in
// double, attributes and their defaults, integer forms, Clip's two forms,
// Cast, Dropout and the errors.
#include <cmath>
#include <functional>
#include <limits>

#include "core/half.h"
#include "elementwise_reduce_test_util.h"

namespace kiln {
namespace elementwise_unary_tests {

using test::F32;
using test::OpCall;
using test::Run1;
using test::Values;

const std::vector<float> kInputs = {-3.5f, -1.0f, -0.25f, 0.0f, 0.3f, 0.5f, 1.0f, 2.5f, 7.0f, -8.0f, 0.9f};

struct UnaryCase {
  const char* op;
  std::function<double(double)> f;
  std::vector<float> inputs = kInputs;
};

double Sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double Softplus(double x) {
  return std::log1p(std::exp(x));
}

TEST(ElementwiseUnary, FloatOpsMatchLibm) {
  const std::vector<float> unit = {-0.9f, -0.5f, -0.1f, 0.0f, 0.2f, 0.7f, 0.95f};
  const std::vector<float> positive = {0.1f, 0.5f, 1.0f, 2.0f, 10.0f, 123.0f};
  const std::vector<UnaryCase> cases = {
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Neg", [](double x) { return -x; }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }, positive},
      {"Sqrt", [](double x) { return std::sqrt(x); }, positive},
      {"Reciprocal", [](double x) { return 1.0 / x; }, positive},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Round",
       [](double x) { return std::nearbyint(x); },
       {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f, -2.4f}},
      {"Sign", [](double x) { return x > 0   ? 1.0
                                     : x < 0 ? -1.0
                                             : 0.0; }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"Tan", [](double x) { return std::tan(x); }, unit},
      {"Asin", [](double x) { return std::asin(x); }, unit},
      {"Acos", [](double x) { return std::acos(x); }, unit},
      {"Atan", [](double x) { return std::atan(x); }},
      {"Sinh", [](double x) { return std::sinh(x); }},
      {"Cosh", [](double x) { return std::cosh(x); }},
      {"Asinh", [](double x) { return std::asinh(x); }},
      {"Acosh", [](double x) { return std::acosh(x); }, {1.0f, 1.5f, 3.0f, 40.0f}},
      {"Atanh", [](double x) { return std::atanh(x); }, unit},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", Sigmoid},
      {"Relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"LeakyRelu", [](double x) { return x < 0 ? 0.01 * x : x; }},
      {"Elu", [](double x) { return x < 0 ? std::exp(x) - 1.0 : x; }},
      {"Selu",
       [](double x) {
         const double a = 1.6732632423543772, g = 1.0507009873554805;
         return x <= 0 ? g * (a * std::exp(x) - a) : g * x;
       }},
      {"Celu", [](double x) { return std::max(0.0, x) + std::min(0.0, std::exp(x) - 1.0); }},
      {"HardSigmoid", [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {"HardSwish", [](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }},
      {"Softplus", Softplus},
      {"Softsign", [](double x) { return x / (1.0 + std::fabs(x)); }},
      {"Gelu", [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Mish", [](double x) { return x * std::tanh(Softplus(x)); }},
      {"ThresholdedRelu", [](double x) { return x > 1.0 ? x : 0.0; }},
      {"Identity", [](double x) { return x; }},
      {"kiln.Silu", [](double x) { return x * Sigmoid(x); }},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<double> want;
    std::vector<double> inputs64;
    for (float x : c.inputs) {
      want.push_back(c.f(x));
      inputs64.push_back(x);
    }
    const int64_t n = static_cast<int64_t>(c.inputs.size());
    TensorData y = Run1({c.op, {F32({n}, c.inputs)}});
    EXPECT_EQ(y.type(), (TensorType{DType::kF32, {n}}));
    test::ExpectNear(Values<float>(y), want, 2e-6, 1e-6);
    if (std::string(c.op) == "Identity") continue;
    // f64 runs in double: tighter (attribute defaults are float32 values, as in ONNX).
    TensorData y64 = Run1({c.op, {test::F64({n}, inputs64)}});
    const std::vector<double> got64 = Values<double>(y64);
    ASSERT_EQ(got64.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got64[i], want[i], 1e-12 + 1e-7 * std::fabs(want[i])) << i;
  }
}

TEST(ElementwiseUnary, FusedSiluEqualsMulOfSigmoid) {
  const std::vector<float> x = {-30.0f, -5.0f, -1.0f, -0.1f, 0.0f,  0.1f, 1.0f,  5.0f, 30.0f,
                                2.5f,   -2.5f, 0.7f,  9.0f,  -9.0f, 3.0f, -3.0f, 4.0f};
  const int64_t n = static_cast<int64_t>(x.size());
  TensorData sig = Run1({"Sigmoid", {F32({n}, x)}});
  const std::vector<float> two_pass = Values<float>(Run1({"Mul", {F32({n}, x), sig}}));
  const std::vector<float> fused = Values<float>(Run1({"kiln.Silu", {F32({n}, x)}}));
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(fused[i], two_pass[i], 1e-6f * (1.0f + std::fabs(two_pass[i]))) << i;
}

TEST(ElementwiseUnary, AttributesOverrideDefaults) {
  auto with = [](const char* op, std::vector<std::pair<const char*, double>> floats) {
    OpCall c{op, {F32({4}, {-2.0f, -0.5f, 0.5f, 2.0f})}};
    for (auto& [name, v] : floats) c.attrs.SetFloat(name, v);
    return Values<float>(Run1(c));
  };
  test::ExpectNear(with("LeakyRelu", {{"alpha", 0.5}}), {-1.0, -0.25, 0.5, 2.0});
  test::ExpectNear(with("Elu", {{"alpha", 2.0}}), {2 * std::expm1(-2.0), 2 * std::expm1(-0.5), 0.5, 2.0});
  test::ExpectNear(with("HardSigmoid", {{"alpha", 0.5}, {"beta", 0.25}}), {0.0, 0.0, 0.5, 1.0});
  test::ExpectNear(with("ThresholdedRelu", {{"alpha", 0.4}}), {0.0, 0.0, 0.5, 2.0});
  test::ExpectNear(with("Celu", {{"alpha", 2.0}}), {2 * std::expm1(-1.0), 2 * std::expm1(-0.25), 0.5, 2.0});
  test::ExpectNear(with("Selu", {{"alpha", 2.0}, {"gamma", 3.0}}),
                   {3 * (2 * std::exp(-2.0) - 2), 3 * (2 * std::exp(-0.5) - 2), 1.5, 6.0});

  OpCall gelu{"Gelu", {F32({4}, {-2.0f, -0.5f, 0.5f, 2.0f})}};
  gelu.attrs.SetString("approximate", "tanh");
  std::vector<double> want;
  for (double x : {-2.0, -0.5, 0.5, 2.0}) {
    want.push_back(0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
  }
  test::ExpectNear(Values<float>(Run1(gelu)), want, 2e-6, 1e-6);
  gelu.attrs.SetString("approximate", "fast");
  test::ExpectError(gelu, "approximate");
}

TEST(ElementwiseUnary, IntegerForms) {
  EXPECT_EQ(Values<int64_t>(Run1({"Abs", {test::I64({3}, {-5, 0, 7})}})), (std::vector<int64_t>{5, 0, 7}));
  EXPECT_EQ(Values<int32_t>(Run1({"Neg", {test::I32({3}, {-5, 0, 7})}})), (std::vector<int32_t>{5, 0, -7}));
  EXPECT_EQ(Values<int64_t>(Run1({"Sign", {test::I64({3}, {-5, 0, 7})}})), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(Values<int32_t>(Run1({"Relu", {test::I32({3}, {-5, 0, 7})}})), (std::vector<int32_t>{0, 0, 7}));
  // The most negative integer wraps instead of trapping.
  const int64_t lowest = std::numeric_limits<int64_t>::lowest();
  EXPECT_EQ(Values<int64_t>(Run1({"Neg", {test::I64({1}, {lowest})}})), (std::vector<int64_t>{lowest}));
  test::ExpectError({"Sqrt", {test::I64({1}, {4})}}, "dtype i64 not supported");
}

TEST(ElementwiseUnary, PredicatesAndNot) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorData x = F32({4}, {1.0f, inf, -inf, nan});
  EXPECT_EQ(Values<uint8_t>(Run1({"IsNaN", {x}})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1({"IsInf", {x}})), (std::vector<uint8_t>{0, 1, 1, 0}));
  OpCall pos{"IsInf", {x}};
  pos.attrs.SetInt("detect_negative", 0);
  EXPECT_EQ(Values<uint8_t>(Run1(pos)), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(Run1({"IsNaN", {x}}).type().dtype, DType::kBool);
  EXPECT_EQ(Values<uint8_t>(Run1({"Not", {test::Bool({2}, {0, 1})}})), (std::vector<uint8_t>{1, 0}));
  test::ExpectError({"Not", {x}}, "not bool");
}

TEST(ElementwiseUnary, ClipAttributeAndInputForms) {
  TensorData x = F32({5}, {-3.0f, -1.0f, 0.0f, 2.0f, 9.0f});
  OpCall old{"Clip", {x}};
  old.opset = 6;
  old.attrs.SetFloat("min", -1.5);
  old.attrs.SetFloat("max", 2.5);
  test::ExpectNear(Values<float>(Run1(old)), {-1.5, -1.0, 0.0, 2.0, 2.5});
  test::ExpectNear(Values<float>(Run1({"Clip", {x, F32({}, {0.0f}), F32({}, {6.0f})}})), {0, 0, 0, 2, 6});
  test::ExpectNear(Values<float>(Run1({"Clip", {x, std::nullopt, F32({}, {1.0f})}})), {-3, -1, 0, 1, 1});
  test::ExpectNear(Values<float>(Run1({"Clip", {x, F32({}, {-1.0f})}})), {-1, -1, 0, 2, 9});
  test::ExpectNear(Values<float>(Run1({"Clip", {x}})), {-3, -1, 0, 2, 9});
  EXPECT_EQ(
      Values<int64_t>(Run1({"Clip", {test::I64({3}, {-9, 4, 99}), test::I64({}, {0}), test::I64({}, {10})}})),
      (std::vector<int64_t>{0, 4, 10}));
  test::ExpectError({"Clip", {x, F32({2}, {0.0f, 1.0f})}}, "scalar");
}

TEST(ElementwiseUnary, CastBetweenTypes) {
  auto cast = [](TensorData x, int64_t onnx_to) {
    OpCall c{"Cast", {std::move(x)}};
    c.attrs.SetInt("to", onnx_to);
    return Run1(c);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Floats to integers truncate toward zero; NaN becomes 0 and out-of-range values saturate.
  TensorData f = F32({6}, {-2.7f, 2.7f, 0.0f, nan, 1e30f, -1e30f});
  EXPECT_EQ(Values<int64_t>(cast(f, 7)),
            (std::vector<int64_t>{-2, 2, 0, 0, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::lowest()}));
  EXPECT_EQ(Values<int32_t>(cast(f, 6)),
            (std::vector<int32_t>{-2, 2, 0, 0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::lowest()}));
  EXPECT_EQ(Values<uint8_t>(cast(f, 9)), (std::vector<uint8_t>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(cast(f, 9).type().dtype, DType::kBool);
  // Integers wrap when they narrow (as C and numpy).
  EXPECT_EQ(Values<uint8_t>(cast(test::I64({3}, {255, 256, -1}), 2)), (std::vector<uint8_t>{255, 0, 255}));
  EXPECT_EQ(Values<double>(cast(test::I64({2}, {-3, 1LL << 40}), 11)),
            (std::vector<double>{-3.0, 1099511627776.0}));
  EXPECT_EQ(Values<float>(cast(test::Bool({2}, {1, 0}), 1)), (std::vector<float>{1.0f, 0.0f}));
  // f16 round trip of exactly representable values, and rounding to nearest.
  TensorData h = cast(F32({3}, {1.5f, -0.25f, 65504.0f}), 10);
  EXPECT_EQ(h.type().dtype, DType::kF16);
  EXPECT_EQ(Values<uint16_t>(h), (std::vector<uint16_t>{0x3e00, 0xb400, 0x7bff}));
  EXPECT_EQ(Values<float>(cast(h, 1)), (std::vector<float>{1.5f, -0.25f, 65504.0f}));
  EXPECT_EQ(Values<int64_t>(cast(h, 7)), (std::vector<int64_t>{1, 0, 65504}));
  // CastLike takes the target type from its second input.
  TensorData like = Run1({"CastLike", {F32({2}, {3.9f, -3.9f}), test::I32({1}, {0})}});
  EXPECT_EQ(Values<int32_t>(like), (std::vector<int32_t>{3, -3}));

  OpCall str{"Cast", {f}};
  str.attrs.SetInt("to", 8);  // STRING
  test::ExpectError(str, "not supported");
}

TEST(ElementwiseUnary, F16RunsThroughF32) {
  std::vector<uint16_t> bits;
  for (float v : {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f}) bits.push_back(F32ToF16(v));
  TensorData x = TensorData::FromValues<uint16_t>(DType::kF16, {5}, bits);
  TensorData y = Run1({"Sigmoid", {x}});
  EXPECT_EQ(y.type().dtype, DType::kF16);
  const auto got = Values<uint16_t>(y);
  const double in[] = {-2.0, -0.5, 0.0, 1.0, 3.0};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(F16ToF32(got[i]), 1.0 / (1.0 + std::exp(-in[i])), 1e-3);
}

TEST(ElementwiseUnary, F16BinaryWhereAndSoftmax) {
  auto half = [](std::vector<int64_t> dims, std::vector<float> v) {
    std::vector<uint16_t> bits;
    for (float f : v) bits.push_back(F32ToF16(f));
    return TensorData::FromValues<uint16_t>(DType::kF16, std::move(dims), bits);
  };
  auto floats = [](const TensorData& t) {
    std::vector<float> v;
    for (uint16_t b : Values<uint16_t>(t)) v.push_back(F16ToF32(b));
    return v;
  };
  TensorData a = half({2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  TensorData b = half({2}, {0.5f, -1.0f});
  TensorData sum = Run1({"Add", {a, b}});
  EXPECT_EQ(sum.type(), (TensorType{DType::kF16, {2, 2}}));
  EXPECT_EQ(floats(sum), (std::vector<float>{1.5f, 1.0f, 3.5f, 3.0f}));
  EXPECT_EQ(Values<uint8_t>(Run1({"Less", {a, b}})), (std::vector<uint8_t>{0, 0, 0, 0}));
  TensorData picked = Run1({"Where", {test::Bool({2}, {1, 0}), a, b}});
  EXPECT_EQ(floats(picked), (std::vector<float>{1.0f, -1.0f, 3.0f, -1.0f}));
  const std::vector<float> soft = floats(Run1({"Softmax", {a}}));
  const double e = std::exp(1.0);
  test::ExpectNear(soft, {1 / (1 + e), e / (1 + e), 1 / (1 + e), e / (1 + e)}, 1e-3, 1e-4);
}

TEST(ElementwiseUnary, DropoutIsTheIdentityInInference) {
  TensorData x = F32({2, 2}, {1.0f, -2.0f, 3.0f, 4.0f});
  OpCall c{"Dropout", {x, F32({}, {0.5f})}};
  c.num_outputs = 2;
  auto out = test::Run(c);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(x));
  EXPECT_EQ((*out)[1].type(), (TensorType{DType::kBool, {2, 2}}));
  EXPECT_EQ(Values<uint8_t>((*out)[1]), (std::vector<uint8_t>{1, 1, 1, 1}));
  OpCall training{"Dropout", {x, F32({}, {0.5f}), test::Bool({}, {1})}};
  test::ExpectError(training, "inference only");
  OpCall zero_ratio{"Dropout", {x, F32({}, {0.0f}), test::Bool({}, {1})}};
  EXPECT_EQ(Values<float>(Run1(zero_ratio)), Values<float>(x));
}

}  // namespace elementwise_unary_tests
}  // namespace kiln
