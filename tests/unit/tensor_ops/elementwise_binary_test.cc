// The binary and variadic elementwise ops through RunTensorOp:
// broadcasting patterns against an independent index computation, integer
// semantics (truncating division, both Mod forms, division by zero),
// comparisons and logic, Where's three-way broadcast, PRelu, the errors.
#include <cmath>
#include <limits>
#include <random>

#include "core/thread_pool.h"
#include "elementwise_reduce_test_util.h"

namespace kiln {
namespace elementwise_binary_tests {

using test::F32;
using test::I32;
using test::I64;
using test::OpCall;
using test::Run1;
using test::Values;

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The element of `dims` (right-aligned against out) that output index i reads.
int64_t SourceIndex(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& dims) {
  int64_t src = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t axis = out.size() - 1 - k;
    const int64_t coord = i % out[axis];
    i /= out[axis];
    if (k < dims.size()) {
      const int64_t d = dims[dims.size() - 1 - k];
      src += (d == 1 ? 0 : coord) * stride;
      stride *= d;
    }
  }
  return src;
}

struct Shapes {
  std::vector<int64_t> a, b, out;
};

TEST(ElementwiseBinary, ArithmeticBroadcastsLikeNumpy) {
  const std::vector<Shapes> shapes = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},           // same shape
      {{2, 3, 4}, {}, {2, 3, 4}},                  // scalar
      {{1}, {2, 3, 4}, {2, 3, 4}},                 // scalar on the left
      {{2, 3, 5, 5}, {1, 3, 1, 1}, {2, 3, 5, 5}},  // per-channel on NCHW
      {{2, 7, 6}, {6}, {2, 7, 6}},                 // bias along the last axis
      {{3, 1}, {1, 4}, {3, 4}},                    // both sides
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},              // both sides, ranks differ
      {{4, 1, 3, 1}, {1, 5, 1, 2}, {4, 5, 3, 2}},
      {{2, 0, 3}, {3}, {2, 0, 3}},  // empty
      {{33}, {33}, {33}},           // a partial vector at the end
  };
  const std::vector<std::pair<const char*, double (*)(double, double)>> ops = {
      {"Add", [](double x, double y) { return x + y; }},
      {"Sub", [](double x, double y) { return x - y; }},
      {"Mul", [](double x, double y) { return x * y; }},
      {"Div", [](double x, double y) { return x / y; }},
      {"Pow", [](double x, double y) { return std::pow(std::fabs(x), y); }},
      {"Max", [](double x, double y) { return std::max(x, y); }},
      {"Min", [](double x, double y) { return std::min(x, y); }},
  };
  uint32_t seed = 1;
  for (const Shapes& s : shapes) {
    std::vector<float> a = Random(Count(s.a), seed++);
    const std::vector<float> b = Random(Count(s.b), seed++);
    for (const auto& [op, f] : ops) {
      SCOPED_TRACE(std::string(op) + " [" + DimsToString(s.a) + "] [" + DimsToString(s.b) + "]");
      std::vector<float> lhs = a;
      if (std::string(op) == "Pow") {
        for (auto& x : lhs) x = std::fabs(x);
      }
      TensorData y = Run1({op, {F32(s.a, lhs), F32(s.b, b)}});
      EXPECT_EQ(y.type(), (TensorType{DType::kF32, s.out}));
      std::vector<double> want(Count(s.out));
      for (int64_t i = 0; i < Count(s.out); ++i) {
        want[i] = f(lhs[SourceIndex(i, s.out, s.a)], b[SourceIndex(i, s.out, s.b)]);
      }
      test::ExpectNear(Values<float>(y), want, 1e-6, 1e-6);
    }
  }
}

TEST(ElementwiseBinary, LargeTensorsSplitOverThreadsGiveTheSameResult) {
  ThreadPool pool(2);
  const std::vector<int64_t> x_dims = {1, 16, 64, 80};
  const std::vector<float> x = Random(Count(x_dims), 11);
  const std::vector<float> bias = Random(16, 12);
  for (const char* op : {"Add", "Mul", "Sub", "Div"}) {
    OpCall serial{op, {F32(x_dims, x), F32({1, 16, 1, 1}, bias)}};
    OpCall threaded = serial;
    threaded.pool = &pool;
    EXPECT_EQ(Values<float>(Run1(serial)), Values<float>(Run1(threaded))) << op;
  }
  // Same shapes merge into one long row, which is split by columns.
  const std::vector<float> x2 = Random(Count(x_dims), 13);
  for (const char* op : {"Add", "Sum", "Max"}) {
    OpCall serial{op, {F32(x_dims, x), F32(x_dims, x2)}};
    OpCall threaded = serial;
    threaded.pool = &pool;
    const std::vector<float> want = Values<float>(Run1(serial));
    EXPECT_EQ(Values<float>(Run1(threaded)), want) << op;
    if (std::string(op) != "Max") {
      for (size_t i = 0; i < want.size(); i += 997) EXPECT_EQ(want[i], x[i] + x2[i]) << i;
    }
  }
  std::vector<uint8_t> mask(x.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7) % 3 == 0;
  OpCall where{"Where", {test::Bool(x_dims, mask), F32(x_dims, x), F32({}, {0.0f})}};
  OpCall where_threaded = where;
  where_threaded.pool = &pool;
  const std::vector<float> picked = Values<float>(Run1(where_threaded));
  EXPECT_EQ(picked, Values<float>(Run1(where)));
  for (size_t i = 0; i < picked.size(); i += 991) EXPECT_EQ(picked[i], mask[i] ? x[i] : 0.0f) << i;
  OpCall sig{"Sigmoid", {F32(x_dims, x)}};
  OpCall sig_threaded = sig;
  sig_threaded.pool = &pool;
  EXPECT_EQ(Values<float>(Run1(sig)), Values<float>(Run1(sig_threaded)));
}

TEST(ElementwiseBinary, IntegerDivisionTruncatesAndModFollowsFmod) {
  TensorData a = I64({6}, {7, -7, 7, -7, 0, std::numeric_limits<int64_t>::lowest()});
  TensorData b = I64({6}, {2, 2, -2, -2, 3, -1});
  EXPECT_EQ(Values<int64_t>(Run1({"Div", {a, b}})),
            (std::vector<int64_t>{3, -3, -3, 3, 0, std::numeric_limits<int64_t>::lowest()}));
  // fmod=0: the remainder has the divisor's sign; fmod=1: the dividend's.
  EXPECT_EQ(Values<int64_t>(Run1({"Mod", {a, b}})), (std::vector<int64_t>{1, 1, -1, -1, 0, 0}));
  OpCall c_mod{"Mod", {a, b}};
  c_mod.attrs.SetInt("fmod", 1);
  EXPECT_EQ(Values<int64_t>(Run1(c_mod)), (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));
  OpCall f_mod{"Mod", {F32({2}, {5.5f, -5.5f}), F32({1}, {2.0f})}};
  f_mod.attrs.SetInt("fmod", 1);
  test::ExpectNear(Values<float>(Run1(f_mod)), {1.5, -1.5});
  test::ExpectError({"Mod", {F32({1}, {1.0f}), F32({1}, {2.0f})}}, "fmod");
  test::ExpectError({"Div", {I32({2}, {1, 2}), I32({2}, {1, 0})}}, "division by zero");
  test::ExpectError({"Mod", {I64({1}, {1}), I64({1}, {0})}}, "division by zero");
  EXPECT_EQ(Values<int32_t>(Run1({"Add", {I32({2, 1}, {1, 2}), I32({3}, {10, 20, 30})}})),
            (std::vector<int32_t>{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(Values<int64_t>(Run1({"Mul", {I64({2}, {3, -4}), I64({}, {5})}})),
            (std::vector<int64_t>{15, -20}));
  // Overflow wraps (two's complement) instead of being undefined.
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Values<int64_t>(Run1({"Add", {I64({1}, {top}), I64({1}, {1})}})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::lowest()}));
  EXPECT_EQ(Values<int32_t>(Run1({"Mul", {I32({1}, {1 << 30}), I32({1}, {4})}})), (std::vector<int32_t>{0}));
}

TEST(ElementwiseBinary, PowMixesTypes) {
  EXPECT_EQ(Values<int64_t>(Run1({"Pow", {I64({3}, {2, 3, -2}), I64({3}, {10, 2, 3})}})),
            (std::vector<int64_t>{1024, 9, -8}));
  EXPECT_EQ(Values<int32_t>(Run1({"Pow", {I32({2}, {4, 9}), F32({1}, {0.5f})}})),
            (std::vector<int32_t>{2, 3}));
  test::ExpectNear(Values<float>(Run1({"Pow", {F32({2}, {2.0f, 3.0f}), I64({1}, {3})}})), {8.0, 27.0});
  // One exponent: 2 and 1 skip pow (exactly), others call it.
  TensorData base = F32({4}, {-1.5f, 0.0f, 3.0f, 0.25f});
  EXPECT_EQ(Values<float>(Run1({"Pow", {base, F32({}, {2.0f})}})),
            (std::vector<float>{2.25f, 0.0f, 9.0f, 0.0625f}));
  EXPECT_EQ(Values<float>(Run1({"Pow", {base, I64({1}, {2})}})),
            (std::vector<float>{2.25f, 0.0f, 9.0f, 0.0625f}));
  EXPECT_EQ(Values<float>(Run1({"Pow", {base, I32({}, {1})}})), Values<float>(base));
  test::ExpectNear(Values<float>(Run1({"Pow", {base, test::F64({}, {0.5})}})),
                   {NAN, 0.0, std::sqrt(3.0), 0.5});
}

TEST(ElementwiseBinary, ComparisonsAndLogic) {
  TensorData a = F32({2, 2}, {1.0f, 2.0f, 3.0f, std::numeric_limits<float>::quiet_NaN()});
  TensorData b = F32({2}, {2.0f, 2.0f});
  EXPECT_EQ(Values<uint8_t>(Run1({"Equal", {a, b}})), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1({"Less", {a, b}})), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1({"Greater", {a, b}})), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1({"LessOrEqual", {a, b}})), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(Run1({"GreaterOrEqual", {a, b}})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Run1({"Less", {a, b}}).type().dtype, DType::kBool);
  EXPECT_EQ(Values<uint8_t>(Run1({"Equal", {I64({3}, {1, 2, 3}), I64({1}, {2})}})),
            (std::vector<uint8_t>{0, 1, 0}));
  TensorData p = test::Bool({4}, {0, 0, 1, 1});
  TensorData q = test::Bool({4}, {0, 1, 0, 1});
  EXPECT_EQ(Values<uint8_t>(Run1({"And", {p, q}})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1({"Or", {p, q}})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Values<uint8_t>(Run1({"Xor", {p, q}})), (std::vector<uint8_t>{0, 1, 1, 0}));
  test::ExpectError({"And", {a, a}}, "not bool");
  test::ExpectError({"Less", {a, I64({1}, {1})}}, "input 1 is i64");
}

TEST(ElementwiseBinary, BitShiftAndBitwise) {
  OpCall left{"BitShift", {test::U8({3}, {1, 3, 255}), test::U8({3}, {1, 2, 9})}};
  left.attrs.SetString("direction", "LEFT");
  EXPECT_EQ(Values<uint8_t>(Run1(left)), (std::vector<uint8_t>{2, 12, 0}));
  OpCall right{"BitShift", {test::U8({3}, {16, 255, 1}), test::U8({1}, {2})}};
  right.attrs.SetString("direction", "RIGHT");
  EXPECT_EQ(Values<uint8_t>(Run1(right)), (std::vector<uint8_t>{4, 63, 0}));
  right.attrs.SetString("direction", "UP");
  test::ExpectError(right, "direction");
  EXPECT_EQ(Values<int32_t>(Run1({"BitwiseAnd", {I32({2}, {12, 7}), I32({2}, {10, 1})}})),
            (std::vector<int32_t>{8, 1}));
  EXPECT_EQ(Values<int32_t>(Run1({"BitwiseOr", {I32({2}, {12, 7}), I32({2}, {10, 8})}})),
            (std::vector<int32_t>{14, 15}));
  EXPECT_EQ(Values<int32_t>(Run1({"BitwiseXor", {I32({2}, {12, 7}), I32({2}, {10, 7})}})),
            (std::vector<int32_t>{6, 0}));
  EXPECT_EQ(Values<int32_t>(Run1({"BitwiseNot", {I32({2}, {0, -1})}})), (std::vector<int32_t>{-1, 0}));
}

TEST(ElementwiseBinary, VariadicOps) {
  TensorData a = F32({2, 1}, {1.0f, 4.0f});
  TensorData b = F32({3}, {3.0f, 0.0f, 2.0f});
  TensorData c = F32({}, {2.0f});
  test::ExpectNear(Values<float>(Run1({"Sum", {a, b, c}})), {6, 3, 5, 9, 6, 8});
  test::ExpectNear(Values<float>(Run1({"Mean", {a, b, c}})), {2, 1, 5.0 / 3, 3, 2, 8.0 / 3});
  test::ExpectNear(Values<float>(Run1({"Max", {a, b, c}})), {3, 2, 2, 4, 4, 4});
  test::ExpectNear(Values<float>(Run1({"Min", {a, b, c}})), {1, 0, 1, 2, 0, 2});
  test::ExpectNear(Values<float>(Run1({"Sum", {b}})), {3, 0, 2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  test::ExpectNear(Values<float>(Run1({"Max", {F32({2}, {nan, 1.0f}), F32({2}, {1.0f, nan})}})), {NAN, NAN});
  EXPECT_EQ(Values<int64_t>(Run1({"Max", {I64({3}, {1, 5, -2}), I64({1}, {0})}})),
            (std::vector<int64_t>{1, 5, 0}));
  EXPECT_EQ(Values<int32_t>(Run1({"Sum", {I32({2}, {1, 5}), I32({2}, {2, 2}), I32({1}, {10})}})),
            (std::vector<int32_t>{13, 17}));
  test::ExpectError({"Sum", {F32({2}, {1, 2}), F32({3}, {1, 2, 3})}}, "do not broadcast");
}

TEST(ElementwiseBinary, WhereBroadcastsThreeWays) {
  TensorData cond = test::Bool({2, 1}, {1, 0});
  TensorData x = F32({3}, {1.0f, 2.0f, 3.0f});
  TensorData y = F32({}, {-1.0f});
  TensorData out = Run1({"Where", {cond, x, y}});
  EXPECT_EQ(out.type(), (TensorType{DType::kF32, {2, 3}}));
  EXPECT_EQ(Values<float>(out), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  TensorData i = Run1({"Where", {test::Bool({3}, {0, 1, 0}), I64({3}, {1, 2, 3}), I64({1}, {9})}});
  EXPECT_EQ(Values<int64_t>(i), (std::vector<int64_t>{9, 2, 9}));
  test::ExpectError({"Where", {x, x, x}}, "not bool");
  test::ExpectError({"Where", {cond, x, I64({1}, {1})}}, "input 2 is i64");
}

TEST(ElementwiseBinary, PReluBroadcastsTheSlope) {
  TensorData x = F32({1, 2, 2}, {-1.0f, 2.0f, -3.0f, 4.0f});
  test::ExpectNear(Values<float>(Run1({"PRelu", {x, F32({2, 1}, {0.5f, 0.25f})}})), {-0.5, 2, -0.75, 4});
  test::ExpectNear(Values<float>(Run1({"PRelu", {x, F32({1}, {0.1f})}})), {-0.1, 2, -0.3, 4});
  test::ExpectError({"PRelu", {F32({2}, {1, 2}), F32({2, 2}, {1, 2, 3, 4})}}, "does not broadcast to X");
}

TEST(ElementwiseBinary, ErrorsNameTheOpAndNode) {
  OpCall bad{"Add", {F32({2, 3}, Random(6, 1)), F32({4}, Random(4, 2))}};
  bad.node = "residual_add";
  test::ExpectError(bad, "do not broadcast");
  test::ExpectError({"Add", {F32({1}, {1.0f}), I64({1}, {1})}}, "input 1 is i64");
  test::ExpectError({"Add", {F32({1}, {1.0f})}}, "Add");
}

}  // namespace elementwise_binary_tests
}  // namespace kiln
