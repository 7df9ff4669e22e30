// The binary elementwise kernels with numpy broadcasting (arithmetic,
// comparisons, logic, bit ops), the variadic Min/Max/Sum/Mean, Where and
// PRelu. f32 Add/Sub/Mul/Div run their rows through the vector table.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "backend/cpu/tensor_kernels/blocked_elementwise.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/broadcast_loop.h"
#include "backend/cpu/tensor_kernels/elementwise_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace {

BroadcastPlan PlanFor(const TensorKernelArgs& args, size_t first, size_t count) {
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = first; i < first + count; ++i) dims.push_back(args.inputs[i].dims);
  return MakeBroadcastPlan(args.outputs[0].dims, dims);
}

// A kernel computing out = f(a, b) for inputs 0 and 1.
template <typename A, typename B, typename U, typename F>
TensorKernel BinaryKernel(const TensorKernelArgs& args, F f) {
  BroadcastPlan plan = PlanFor(args, 0, 2);
  TensorKernel k;
  k.impl = "reference";
  k.run = [plan = std::move(plan), f](const TensorCall& call) {
    BroadcastBinary(call.pool, plan, static_cast<const A*>(call.inputs[0]),
                    static_cast<const B*>(call.inputs[1]), static_cast<U*>(call.outputs[0]), f);
    return Status::Ok();
  };
  return k;
}

TensorKernel VecBinaryKernel(const TensorKernelArgs& args, VecBinaryOp op) {
  BroadcastPlan plan = PlanFor(args, 0, 2);
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(TensorVec().isa);
  k.run = [plan = std::move(plan), op](const TensorCall& call) {
    const float* a = static_cast<const float*>(call.inputs[0]);
    const float* b = static_cast<const float*>(call.inputs[1]);
    float* out = static_cast<float*>(call.outputs[0]);
    const TensorVecTable& vec = TensorVec();
    ForEachBroadcastRow(call.pool, plan,
                        [&](int64_t r, const BroadcastCursor& c, int64_t begin, int64_t end) {
                          vec.binary(op, a + c.offset(0) + begin * plan.step[0], plan.step[0],
                                     b + c.offset(1) + begin * plan.step[1], plan.step[1],
                                     out + r * plan.inner + begin, end - begin);
                        });
    return Status::Ok();
  };
  return k;
}

// a op b; integers wrap on overflow (computed unsigned, where C++ defines it).
template <typename T, typename Op>
T Wrapping(T a, T b, Op op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<std::common_type_t<T, unsigned>>;
    return static_cast<T>(op(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return op(a, b);
  }
}

// a / b truncated toward zero (as C and ONNX); b = -1 wraps instead of trapping.
template <typename T>
T IntDiv(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(a));
  }
  return static_cast<T>(a / b);
}
template <typename T>
T IntRem(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return static_cast<T>(a % b);
}

template <typename T>
TensorKernel CheckedIntKernel(const TensorKernelArgs& args, TensorKernel inner) {
  const int64_t nb = args.inputs[1].ElementCount();
  std::string op(args.op_type), node(args.node);
  auto run = inner.run;
  inner.run = [run, nb, op, node](const TensorCall& call) {
    const T* b = static_cast<const T*>(call.inputs[1]);
    for (int64_t i = 0; i < nb; ++i) {
      if (b[i] == 0)
        return InvalidArgument("{} {}: integer division by zero (divisor element {})", op, node, i);
    }
    return run(call);
  };
  return inner;
}

template <typename T>
Expected<TensorKernel> Arithmetic(const TensorKernelArgs& args) {
  const std::string_view op = args.op_type;
  if (op == "Add")
    return BinaryKernel<T, T, T>(args, [](T a, T b) { return Wrapping<T>(a, b, std::plus<>()); });
  if (op == "Sub")
    return BinaryKernel<T, T, T>(args, [](T a, T b) { return Wrapping<T>(a, b, std::minus<>()); });
  if (op == "Mul") {
    return BinaryKernel<T, T, T>(args, [](T a, T b) { return Wrapping<T>(a, b, std::multiplies<>()); });
  }
  if (op == "Div") {
    if constexpr (std::is_integral_v<T>) {
      return CheckedIntKernel<T>(args, BinaryKernel<T, T, T>(args, [](T a, T b) { return IntDiv(a, b); }));
    } else {
      return BinaryKernel<T, T, T>(args, [](T a, T b) { return a / b; });
    }
  }
  if (op == "Mod") {
    const bool fmod = IntAttrOr(args, "fmod", 0) != 0;
    if constexpr (std::is_integral_v<T>) {
      if (fmod)
        return CheckedIntKernel<T>(args, BinaryKernel<T, T, T>(args, [](T a, T b) { return IntRem(a, b); }));
      // The remainder takes the divisor's sign (Python's %).
      return CheckedIntKernel<T>(args, BinaryKernel<T, T, T>(args, [](T a, T b) {
                                   T r = IntRem(a, b);
                                   if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
                                   return r;
                                 }));
    } else {
      if (!fmod)
        return InvalidArgument("{} {}: fmod=0 on floats (ONNX requires fmod=1)", args.op_type, args.node);
      return BinaryKernel<T, T, T>(args, [](T a, T b) { return std::fmod(a, b); });
    }
  }
  if (op == "Equal") return BinaryKernel<T, T, uint8_t>(args, [](T a, T b) { return uint8_t(a == b); });
  if (op == "Less") return BinaryKernel<T, T, uint8_t>(args, [](T a, T b) { return uint8_t(a < b); });
  if (op == "Greater") return BinaryKernel<T, T, uint8_t>(args, [](T a, T b) { return uint8_t(a > b); });
  if (op == "LessOrEqual") return BinaryKernel<T, T, uint8_t>(args, [](T a, T b) { return uint8_t(a <= b); });
  if (op == "GreaterOrEqual")
    return BinaryKernel<T, T, uint8_t>(args, [](T a, T b) { return uint8_t(a >= b); });
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (op == "BitShift") {
      const std::string dir = StringAttrOr(args, "direction", "");
      constexpr U kBits = sizeof(T) * 8;
      if (dir == "LEFT") {
        return BinaryKernel<T, T, T>(args, [](T a, T b) {
          const U s = static_cast<U>(b);
          return static_cast<T>(s >= kBits ? U(0) : static_cast<U>(static_cast<U>(a) << s));
        });
      }
      if (dir == "RIGHT") {
        return BinaryKernel<T, T, T>(args, [](T a, T b) {
          const U s = static_cast<U>(b);
          return static_cast<T>(s >= kBits ? U(0) : static_cast<U>(static_cast<U>(a) >> s));
        });
      }
      return InvalidArgument("{} {}: direction \"{}\" (LEFT or RIGHT)", args.op_type, args.node, dir);
    }
    if (op == "BitwiseAnd")
      return BinaryKernel<T, T, T>(args, [](T a, T b) { return static_cast<T>(a & b); });
    if (op == "BitwiseOr") return BinaryKernel<T, T, T>(args, [](T a, T b) { return static_cast<T>(a | b); });
    if (op == "BitwiseXor")
      return BinaryKernel<T, T, T>(args, [](T a, T b) { return static_cast<T>(a ^ b); });
  }
  return UnsupportedDType(args, args.inputs[0].dtype, "this op takes integers");
}

// Pow: base T, exponent E, result T.
template <typename T, typename E>
TensorKernel PowKernel(const TensorKernelArgs& args) {
  return BinaryKernel<T, E, T>(args, [](T a, E b) {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
      return std::pow(a, b);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    } else {
      // Integer results of a float power, truncated; out-of-range values saturate.
      const double r = std::pow(static_cast<double>(a), static_cast<double>(b));
      if (!(r == r)) return T(0);
      if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
      if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
      return static_cast<T>(r);
    }
  });
}

// f32 x^e with one exponent, read at run time: e = 2 and e = 1 (the
// decomposed normalizations' Pow(x, 2)) are exact as x * x and x, so they
// skip pow; other exponents call it.
template <typename E>
TensorKernel PowScalarF32Kernel(int64_t n) {
  TensorKernel k;
  k.impl = "reference";
  k.run = [n](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    const float e = static_cast<float>(*static_cast<const E*>(call.inputs[1]));
    float* y = static_cast<float*>(call.outputs[0]);
    SplitRanges(call.pool, n, kParallelGrain, [&, e](int64_t b, int64_t end) {
      if (e == 2.0f) {
        for (int64_t i = b; i < end; ++i) y[i] = x[i] * x[i];
      } else if (e == 1.0f) {
        for (int64_t i = b; i < end; ++i) y[i] = x[i];
      } else {
        for (int64_t i = b; i < end; ++i) y[i] = std::pow(x[i], e);
      }
    });
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakePow(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype == DType::kF32 && args.inputs[1].ElementCount() == 1 &&
      args.outputs[0].dims == args.inputs[0].dims) {
    const int64_t n = args.outputs[0].ElementCount();
    switch (args.inputs[1].dtype) {
      case DType::kF32: return PowScalarF32Kernel<float>(n);
      case DType::kF64: return PowScalarF32Kernel<double>(n);
      case DType::kI64: return PowScalarF32Kernel<int64_t>(n);
      case DType::kI32: return PowScalarF32Kernel<int32_t>(n);
      default: break;
    }
  }
  Expected<TensorKernel> result = UnsupportedDType(args, args.inputs[0].dtype, "f32, f64, f16, i64, i32");
  const DType tb = args.inputs[0].dtype;
  const DType te = args.inputs[1].dtype;
  const auto is_pow_type = [](DType t) {
    return t == DType::kF32 || t == DType::kF64 || t == DType::kI64 || t == DType::kI32;
  };
  if (!is_pow_type(tb)) return result;
  if (!is_pow_type(te)) return UnsupportedDType(args, te, "exponent f32, f64, f16, i64, i32");
  VisitNumeric(tb, [&](auto base) {
    VisitNumeric(te, [&](auto exponent) {
      using T = decltype(base);
      using E = decltype(exponent);
      if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                     std::is_same_v<T, int32_t>)&&(std::is_same_v<E, float> || std::is_same_v<E, double> ||
                                                   std::is_same_v<E, int64_t> ||
                                                   std::is_same_v<E, int32_t>)) {
        result = PowKernel<T, E>(args);
      }
    });
  });
  return result;
}

Expected<TensorKernel> MakeBinaryWide(const TensorKernelArgs& args) {
  const std::string_view op = args.op_type;
  const DType t = args.inputs[0].dtype;
  if (op == "Pow") return MakePow(args);
  if (t == DType::kF32) {
    if (op == "Add") return VecBinaryKernel(args, VecBinaryOp::kAdd);
    if (op == "Sub") return VecBinaryKernel(args, VecBinaryOp::kSub);
    if (op == "Mul") return VecBinaryKernel(args, VecBinaryOp::kMul);
    if (op == "Div") return VecBinaryKernel(args, VecBinaryOp::kDiv);
  }
  if (op == "And" || op == "Or" || op == "Xor") {
    if (t != DType::kBool) return UnsupportedDType(args, t, "bool only");
    if (op == "And")
      return BinaryKernel<uint8_t, uint8_t, uint8_t>(args,
                                                     [](uint8_t a, uint8_t b) { return uint8_t(a && b); });
    if (op == "Or")
      return BinaryKernel<uint8_t, uint8_t, uint8_t>(args,
                                                     [](uint8_t a, uint8_t b) { return uint8_t(a || b); });
    return BinaryKernel<uint8_t, uint8_t, uint8_t>(
        args, [](uint8_t a, uint8_t b) { return uint8_t((a != 0) != (b != 0)); });
  }
  if (t == DType::kBool && op != "Equal" && op != "BitwiseAnd" && op != "BitwiseOr" && op != "BitwiseXor") {
    return UnsupportedDType(args, t, "numeric types");
  }
  Expected<TensorKernel> result = UnsupportedDType(args, t, "f32, f64, f16 and integers");
  VisitNumeric(t, [&](auto zero) { result = Arithmetic<decltype(zero)>(args); });
  return result;
}

}  // namespace

Expected<TensorKernel> MakeBinaryKernel(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedBinary(args);
  return MakeViaF32(args, MakeBinaryWide);
}

namespace {

// Min, Max, Sum, Mean: out = in0 broadcast, then out = f(out, in_k).
template <typename T, typename F>
TensorKernel VariadicKernel(const TensorKernelArgs& args, F f, bool mean, bool vec_add) {
  const auto& out_dims = args.outputs[0].dims;
  std::vector<BroadcastPlan> plans;
  for (const TensorType& in : args.inputs) plans.push_back(MakeBroadcastPlan(out_dims, {out_dims, in.dims}));
  const int64_t n = args.outputs[0].ElementCount();
  const size_t count = args.inputs.size();
  TensorKernel k;
  k.impl = vec_add ? std::string("kiln-") + IsaName(TensorVec().isa) : "reference";
  // The result builds up in the output, unless the output is one of the
  // later inputs (an in-place plan): then in scratch, copied at the end.
  k.scratch_bytes = static_cast<size_t>(n) * sizeof(T);
  k.run = [plans = std::move(plans), f, mean, vec_add, n, count](const TensorCall& call) {
    (void)vec_add;  // read only by the f32 instantiation
    bool aliased = false;
    for (size_t i = 1; i < count; ++i) aliased |= call.inputs[i] == call.outputs[0];
    T* out = aliased ? reinterpret_cast<T*>(call.scratch) : static_cast<T*>(call.outputs[0]);
    // The first input broadcast to the output: out = in0 (the left operand ignored).
    BroadcastBinary(call.pool, plans[0], out, static_cast<const T*>(call.inputs[0]), out,
                    [](T, T b) { return b; });
    for (size_t i = 1; i < count; ++i) {
      const T* in = static_cast<const T*>(call.inputs[i]);
      if constexpr (std::is_same_v<T, float>) {
        if (vec_add) {
          const TensorVecTable& vec = TensorVec();
          const BroadcastPlan& plan = plans[i];
          ForEachBroadcastRow(call.pool, plan,
                              [&](int64_t r, const BroadcastCursor& c, int64_t begin, int64_t end) {
                                vec.binary(VecBinaryOp::kAdd, out + c.offset(0) + begin * plan.step[0],
                                           plan.step[0], in + c.offset(1) + begin * plan.step[1],
                                           plan.step[1], out + r * plan.inner + begin, end - begin);
                              });
          continue;
        }
      }
      BroadcastBinary(call.pool, plans[i], out, in, out, f);
    }
    if (mean) {
      const T scale = static_cast<T>(count);
      for (int64_t j = 0; j < n; ++j) out[j] = static_cast<T>(out[j] / scale);
    }
    if (aliased && n > 0) std::memcpy(call.outputs[0], out, static_cast<size_t>(n) * sizeof(T));
    return Status::Ok();
  };
  return k;
}

template <typename T>
Expected<TensorKernel> Variadic(const TensorKernelArgs& args) {
  const std::string_view op = args.op_type;
  // Max and Min propagate NaN as numpy's maximum and minimum do.
  if (op == "Max")
    return VariadicKernel<T>(
        args, [](T a, T b) { return (a >= b || a != a) ? a : b; }, false, false);
  if (op == "Min")
    return VariadicKernel<T>(
        args, [](T a, T b) { return (a <= b || a != a) ? a : b; }, false, false);
  const bool vec = std::is_same_v<T, float>;
  if (op == "Sum")
    return VariadicKernel<T>(
        args, [](T a, T b) { return Wrapping<T>(a, b, std::plus<>()); }, false, vec);
  if constexpr (std::is_floating_point_v<T>) {
    if (op == "Mean")
      return VariadicKernel<T>(
          args, [](T a, T b) { return static_cast<T>(a + b); }, true, vec);
  }
  return UnsupportedDType(args, args.inputs[0].dtype, "floats");
}

Expected<TensorKernel> MakeVariadicWide(const TensorKernelArgs& args) {
  const DType t = args.inputs[0].dtype;
  if (t == DType::kBool) return UnsupportedDType(args, t, "numeric types");
  Expected<TensorKernel> result = UnsupportedDType(args, t, "numeric types");
  VisitNumeric(t, [&](auto zero) { result = Variadic<decltype(zero)>(args); });
  return result;
}

template <typename T>
TensorKernel WhereKernel(const TensorKernelArgs& args) {
  BroadcastPlan plan = PlanFor(args, 0, 3);
  TensorKernel k;
  k.impl = "reference";
  k.run = [plan = std::move(plan)](const TensorCall& call) {
    const uint8_t* cond = static_cast<const uint8_t*>(call.inputs[0]);
    const T* x = static_cast<const T*>(call.inputs[1]);
    const T* y = static_cast<const T*>(call.inputs[2]);
    T* out = static_cast<T*>(call.outputs[0]);
    const int64_t n = plan.inner;
    const int64_t sc = plan.step[0], sx = plan.step[1], sy = plan.step[2];
    // The loop for each pattern of steps, so that the common ones vectorize.
    auto rows = [&](auto csc, auto csx, auto csy) {
      constexpr int64_t kc = decltype(csc)::value, kx = decltype(csx)::value, ky = decltype(csy)::value;
      ForEachBroadcastRow(call.pool, plan,
                          [&](int64_t r, const BroadcastCursor& c, int64_t begin, int64_t end) {
                            const uint8_t* pc = cond + c.offset(0) + begin * kc;
                            const T* px = x + c.offset(1) + begin * kx;
                            const T* py = y + c.offset(2) + begin * ky;
                            T* po = out + r * n + begin;
                            for (int64_t i = 0; i < end - begin; ++i)
                              po[i] = pc[i * kc] ? px[i * kx] : py[i * ky];
                          });
    };
    using One = std::integral_constant<int64_t, 1>;
    using Zero = std::integral_constant<int64_t, 0>;
    const int pattern = (sc != 0 ? 4 : 0) | (sx != 0 ? 2 : 0) | (sy != 0 ? 1 : 0);
    switch (pattern) {
      case 7: rows(One{}, One{}, One{}); break;
      case 6: rows(One{}, One{}, Zero{}); break;
      case 5: rows(One{}, Zero{}, One{}); break;
      case 4: rows(One{}, Zero{}, Zero{}); break;
      case 3: rows(Zero{}, One{}, One{}); break;
      case 2: rows(Zero{}, One{}, Zero{}); break;
      case 1: rows(Zero{}, Zero{}, One{}); break;
      default: rows(Zero{}, Zero{}, Zero{}); break;
    }
    return Status::Ok();
  };
  return k;
}

template <typename T>
TensorKernel PReluKernel(const TensorKernelArgs& args) {
  return BinaryKernel<T, T, T>(args, [](T x, T slope) { return x < 0 ? static_cast<T>(x * slope) : x; });
}

Expected<TensorKernel> MakePReluWide(const TensorKernelArgs& args) {
  const DType t = args.inputs[0].dtype;
  Expected<TensorKernel> result = UnsupportedDType(args, t, "f32, f64, f16, signed integers");
  if (t == DType::kBool || t == DType::kU8) return result;
  VisitNumeric(t, [&](auto zero) { result = PReluKernel<decltype(zero)>(args); });
  return result;
}

}  // namespace

Expected<TensorKernel> MakeVariadicKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeVariadicWide);
}

Expected<TensorKernel> MakeWhereKernel(const TensorKernelArgs& args) {
  switch (ElementBytes(args.outputs[0].dtype)) {
    case 1: return WhereKernel<uint8_t>(args);
    case 2: return WhereKernel<uint16_t>(args);
    case 4: return WhereKernel<uint32_t>(args);
    case 8: return WhereKernel<uint64_t>(args);
    default: return UnsupportedDType(args, args.outputs[0].dtype, "plain types");
  }
}

Expected<TensorKernel> MakePReluKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakePReluWide);
}

}  // namespace kiln::cpu
