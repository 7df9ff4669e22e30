// The unary elementwise kernels: math and activations (f32 and f64; the
// common f32 activations through the vector table), the integer-capable
// ones (Abs, Neg, Sign, Relu), the predicates and Clip.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "backend/cpu/tensor_kernels/blocked_elementwise.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/elementwise_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace {

// y[i] = f(x[i]) over n elements, split over the pool.
template <typename T, typename U, typename F>
TensorKernel MapKernel(int64_t n, F f) {
  TensorKernel k;
  k.impl = "reference";
  k.run = [n, f](const TensorCall& call) {
    const T* x = static_cast<const T*>(call.inputs[0]);
    U* y = static_cast<U*>(call.outputs[0]);
    SplitRanges(call.pool, n, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
    });
    return Status::Ok();
  };
  return k;
}

TensorKernel VecUnaryKernel(VecUnaryOp op, float alpha, float beta, int64_t n) {
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(TensorVec().isa);
  k.run = [op, alpha, beta, n](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    float* y = static_cast<float*>(call.outputs[0]);
    const TensorVecTable& vec = TensorVec();
    SplitRanges(call.pool, n, kParallelGrain,
                   [&](int64_t b, int64_t e) { vec.unary(op, alpha, beta, x + b, y + b, e - b); });
    return Status::Ok();
  };
  return k;
}

// The f32 ops the vector table has, with their parameters.
std::optional<VecUnaryOp> VecOpFor(const TensorKernelArgs& args, float* alpha, float* beta) {
  const std::string_view op = args.op_type;
  if (op == "Relu") return VecUnaryOp::kRelu;
  if (op == "LeakyRelu") {
    *alpha = FloatAttrOr(args, "alpha", 0.01f);
    return VecUnaryOp::kLeakyRelu;
  }
  if (op == "HardSigmoid") {
    *alpha = FloatAttrOr(args, "alpha", 0.2f);
    *beta = FloatAttrOr(args, "beta", 0.5f);
    return VecUnaryOp::kHardSigmoid;
  }
  if (op == "HardSwish") return VecUnaryOp::kHardSwish;
  if (op == "Sigmoid") return VecUnaryOp::kSigmoid;
  if (op == "kiln.Silu") return VecUnaryOp::kSilu;
  if (op == "Tanh") return VecUnaryOp::kTanh;
  if (op == "Exp") return VecUnaryOp::kExp;
  if (op == "Erf") return VecUnaryOp::kErf;
  if (op == "Gelu") {
    const std::string approx = StringAttrOr(args, "approximate", "none");
    if (approx == "tanh") return VecUnaryOp::kGeluTanh;
    if (approx == "none") return VecUnaryOp::kGelu;
  }
  return std::nullopt;
}

// v clamped to [0, 1]; NaN stays NaN (as numpy's clip).
template <typename T>
T Clamp01(T v) {
  return v < 0 ? T(0) : v > 1 ? T(1) : v;
}

template <typename T>
T Softplus(T x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// The float ops (T = float or double).
template <typename T>
Expected<TensorKernel> FloatUnary(const TensorKernelArgs& args, int64_t n) {
  const std::string_view op = args.op_type;
  const T alpha_attr = static_cast<T>(FloatAttrOr(args, "alpha", 1.0f));
  if (op == "Abs") return MapKernel<T, T>(n, [](T x) { return std::abs(x); });
  if (op == "Neg") return MapKernel<T, T>(n, [](T x) { return -x; });
  if (op == "Exp") return MapKernel<T, T>(n, [](T x) { return std::exp(x); });
  if (op == "Log") return MapKernel<T, T>(n, [](T x) { return std::log(x); });
  if (op == "Sqrt") return MapKernel<T, T>(n, [](T x) { return std::sqrt(x); });
  if (op == "Reciprocal") return MapKernel<T, T>(n, [](T x) { return T(1) / x; });
  if (op == "Floor") return MapKernel<T, T>(n, [](T x) { return std::floor(x); });
  if (op == "Ceil") return MapKernel<T, T>(n, [](T x) { return std::ceil(x); });
  if (op == "Round") return MapKernel<T, T>(n, [](T x) { return std::nearbyint(x); });  // halves to even
  if (op == "Sign") return MapKernel<T, T>(n, [](T x) { return x > 0 ? T(1) : x < 0 ? T(-1) : x; });
  if (op == "Sin") return MapKernel<T, T>(n, [](T x) { return std::sin(x); });
  if (op == "Cos") return MapKernel<T, T>(n, [](T x) { return std::cos(x); });
  if (op == "Tan") return MapKernel<T, T>(n, [](T x) { return std::tan(x); });
  if (op == "Asin") return MapKernel<T, T>(n, [](T x) { return std::asin(x); });
  if (op == "Acos") return MapKernel<T, T>(n, [](T x) { return std::acos(x); });
  if (op == "Atan") return MapKernel<T, T>(n, [](T x) { return std::atan(x); });
  if (op == "Sinh") return MapKernel<T, T>(n, [](T x) { return std::sinh(x); });
  if (op == "Cosh") return MapKernel<T, T>(n, [](T x) { return std::cosh(x); });
  if (op == "Asinh") return MapKernel<T, T>(n, [](T x) { return std::asinh(x); });
  if (op == "Acosh") return MapKernel<T, T>(n, [](T x) { return std::acosh(x); });
  if (op == "Atanh") return MapKernel<T, T>(n, [](T x) { return std::atanh(x); });
  if (op == "Tanh") return MapKernel<T, T>(n, [](T x) { return std::tanh(x); });
  if (op == "Erf") return MapKernel<T, T>(n, [](T x) { return std::erf(x); });
  if (op == "Sigmoid") return MapKernel<T, T>(n, [](T x) { return T(1) / (T(1) + std::exp(-x)); });
  if (op == "kiln.Silu") return MapKernel<T, T>(n, [](T x) { return x / (T(1) + std::exp(-x)); });
  if (op == "Relu") return MapKernel<T, T>(n, [](T x) { return x < 0 ? T(0) : x; });
  if (op == "LeakyRelu") {
    const T alpha = static_cast<T>(FloatAttrOr(args, "alpha", 0.01f));
    return MapKernel<T, T>(n, [alpha](T x) { return x < 0 ? alpha * x : x; });
  }
  if (op == "Elu")
    return MapKernel<T, T>(n, [alpha_attr](T x) { return x < 0 ? alpha_attr * std::expm1(x) : x; });
  if (op == "Selu") {
    const T alpha = static_cast<T>(FloatAttrOr(args, "alpha", 1.67326319217681884765625f));
    const T gamma = static_cast<T>(FloatAttrOr(args, "gamma", 1.05070102214813232421875f));
    return MapKernel<T, T>(
        n, [alpha, gamma](T x) { return x <= 0 ? gamma * (alpha * std::exp(x) - alpha) : gamma * x; });
  }
  if (op == "Celu") {
    if (alpha_attr == 0) return InvalidArgument("{} {}: alpha must not be 0", args.op_type, args.node);
    return MapKernel<T, T>(
        n, [a = alpha_attr](T x) { return std::max(T(0), x) + std::min(T(0), a * std::expm1(x / a)); });
  }
  if (op == "HardSigmoid") {
    const T alpha = static_cast<T>(FloatAttrOr(args, "alpha", 0.2f));
    const T beta = static_cast<T>(FloatAttrOr(args, "beta", 0.5f));
    return MapKernel<T, T>(n, [alpha, beta](T x) { return Clamp01(alpha * x + beta); });
  }
  if (op == "HardSwish") {
    return MapKernel<T, T>(n, [](T x) { return x * Clamp01(x / T(6) + T(0.5)); });
  }
  if (op == "Softplus") return MapKernel<T, T>(n, [](T x) { return Softplus(x); });
  if (op == "Softsign") return MapKernel<T, T>(n, [](T x) { return x / (T(1) + std::abs(x)); });
  if (op == "Mish") return MapKernel<T, T>(n, [](T x) { return x * std::tanh(Softplus(x)); });
  if (op == "ThresholdedRelu")
    return MapKernel<T, T>(n, [alpha_attr](T x) { return x > alpha_attr ? x : T(0); });
  if (op == "Gelu") {
    const std::string approx = StringAttrOr(args, "approximate", "none");
    if (approx == "tanh") {
      return MapKernel<T, T>(n, [](T x) {
        const T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
        return T(0.5) * x * (T(1) + std::tanh(u));
      });
    }
    if (approx != "none")
      return InvalidArgument("{} {}: approximate={} (none or tanh)", args.op_type, args.node, approx);
    return MapKernel<T, T>(n, [](T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476))); });
  }
  if (op == "IsNaN") return MapKernel<T, uint8_t>(n, [](T x) { return static_cast<uint8_t>(std::isnan(x)); });
  if (op == "IsInf") {
    const bool neg = IntAttrOr(args, "detect_negative", 1) != 0;
    const bool pos = IntAttrOr(args, "detect_positive", 1) != 0;
    return MapKernel<T, uint8_t>(n, [neg, pos](T x) {
      return static_cast<uint8_t>((pos && x == std::numeric_limits<T>::infinity()) ||
                                  (neg && x == -std::numeric_limits<T>::infinity()));
    });
  }
  return UnsupportedDType(args, args.inputs[0].dtype, "an integer type; this op takes floats");
}

// The ops defined on integers too.
template <typename T>
Expected<TensorKernel> IntegerUnary(const TensorKernelArgs& args, int64_t n) {
  const std::string_view op = args.op_type;
  if constexpr (std::is_signed_v<T>) {
    // Negation in unsigned arithmetic: the most negative value wraps to itself (no overflow).
    using U = std::make_unsigned_t<T>;
    if (op == "Abs") return MapKernel<T, T>(n, [](T x) { return x < 0 ? static_cast<T>(U(0) - U(x)) : x; });
    if (op == "Neg") return MapKernel<T, T>(n, [](T x) { return static_cast<T>(U(0) - U(x)); });
    if (op == "Relu") return MapKernel<T, T>(n, [](T x) { return x < 0 ? T(0) : x; });
    if (op == "Sign")
      return MapKernel<T, T>(n, [](T x) { return static_cast<T>(x > 0 ? 1 : x < 0 ? -1 : 0); });
  } else {
    if (op == "Abs" || op == "Relu") return MapKernel<T, T>(n, [](T x) { return x; });
    if (op == "Sign") return MapKernel<T, T>(n, [](T x) { return static_cast<T>(x > 0 ? 1 : 0); });
  }
  if (op == "BitwiseNot") return MapKernel<T, T>(n, [](T x) { return static_cast<T>(~x); });
  if (op == "IsNaN" || op == "IsInf") return MapKernel<T, uint8_t>(n, [](T) { return uint8_t{0}; });
  return UnsupportedDType(args, args.inputs[0].dtype, "this op takes floats");
}

TensorKernel CopyKernel(size_t bytes) {
  TensorKernel k;
  k.impl = "copy";
  k.run = [bytes](const TensorCall& call) {
    if (call.outputs[0] != call.inputs[0] && bytes > 0) std::memcpy(call.outputs[0], call.inputs[0], bytes);
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeUnaryF32OrWider(const TensorKernelArgs& args) {
  const DType t = args.inputs[0].dtype;
  const int64_t n = args.outputs[0].ElementCount();
  if (t == DType::kF32) {
    float alpha = 0.0f, beta = 0.0f;
    if (auto vop = VecOpFor(args, &alpha, &beta)) return VecUnaryKernel(*vop, alpha, beta, n);
    return FloatUnary<float>(args, n);
  }
  if (t == DType::kF64) return FloatUnary<double>(args, n);
  Expected<TensorKernel> result = UnsupportedDType(args, t, "f32, f64, f16 and integers");
  VisitNumeric(t, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) result = IntegerUnary<T>(args, n);
  });
  return result;
}

Expected<TensorKernel> MakeUnaryRowMajor(const TensorKernelArgs& args) {
  const DType t = args.inputs[0].dtype;
  if (args.op_type == "Identity") return CopyKernel(args.outputs[0].Bytes());
  if (args.op_type == "Not") {
    if (t != DType::kBool) return UnsupportedDType(args, t, "bool only");
    return MapKernel<uint8_t, uint8_t>(args.outputs[0].ElementCount(),
                                       [](uint8_t x) { return uint8_t(x == 0); });
  }
  if (args.op_type == "BitwiseNot" && t == DType::kBool) return UnsupportedDType(args, t, "integers");
  return MakeViaF32(args, MakeUnaryF32OrWider);
}

}  // namespace

Expected<TensorKernel> MakeUnaryKernel(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedUnary(args, MakeUnaryRowMajor);
  return MakeUnaryRowMajor(args);
}

Expected<TensorKernel> MakeDropoutKernel(const TensorKernelArgs& args) {
  TensorKernel k = CopyKernel(args.outputs[0].Bytes());
  if (args.outputs.size() > 1) {
    const size_t mask_bytes = args.outputs[1].Bytes();
    auto copy = k.run;
    k.run = [copy, mask_bytes](const TensorCall& call) {
      KILN_RETURN_IF_ERROR(copy(call));
      std::memset(call.outputs[1], 1, mask_bytes);  // inference keeps every element
      return Status::Ok();
    };
  }
  return k;
}

namespace {

template <typename T>
T ScalarAt(const void* p) {
  return *static_cast<const T*>(p);
}

// Clip for T: bounds from attributes (opset < 11) or from the optional
// min and max inputs, read at run time.
template <typename T>
TensorKernel ClipKernel(const TensorKernelArgs& args) {
  const bool from_inputs = args.inputs.size() > 1;
  T lo = std::numeric_limits<T>::lowest();
  T hi = std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) {
    lo = -std::numeric_limits<T>::infinity();
    hi = std::numeric_limits<T>::infinity();
  }
  if (!from_inputs) {
    if (args.a().Has("min")) lo = static_cast<T>(FloatAttrOr(args, "min", 0.0f));
    if (args.a().Has("max")) hi = static_cast<T>(FloatAttrOr(args, "max", 0.0f));
  }
  const int64_t n = args.outputs[0].ElementCount();
  TensorKernel k;
  k.impl = "reference";
  k.run = [n, lo, hi](const TensorCall& call) {
    T low = lo, high = hi;
    if (call.inputs[1] != nullptr) low = ScalarAt<T>(call.inputs[1]);
    if (call.inputs[2] != nullptr) high = ScalarAt<T>(call.inputs[2]);
    const T* x = static_cast<const T*>(call.inputs[0]);
    T* y = static_cast<T*>(call.outputs[0]);
    SplitRanges(call.pool, n, kParallelGrain, [&, low, high](int64_t b, int64_t e) {
      // NaN stays NaN; written as max/min, with the bounds in locals that
      // the stores cannot alias, so that it vectorizes.
      const T lo_v = low, hi_v = high;
      for (int64_t i = b; i < e; ++i) {
        const T v = lo_v > x[i] ? lo_v : x[i];
        y[i] = v > hi_v ? hi_v : v;
      }
    });
    return Status::Ok();
  };
  if (!from_inputs) {
    // The run function reads inputs 1 and 2; without them there are none.
    auto run = k.run;
    k.run = [run](const TensorCall& call) {
      const void* ins[3] = {call.inputs[0], nullptr, nullptr};
      TensorCall c = call;
      c.inputs = ins;
      return run(c);
    };
  } else if (args.inputs.size() == 2) {
    auto run = k.run;
    k.run = [run](const TensorCall& call) {
      const void* ins[3] = {call.inputs[0], call.inputs[1], nullptr};
      TensorCall c = call;
      c.inputs = ins;
      return run(c);
    };
  }
  return k;
}

Expected<TensorKernel> MakeClipF32OrOther(const TensorKernelArgs& args) {
  Expected<TensorKernel> result = UnsupportedDType(args, args.inputs[0].dtype, "numeric types");
  VisitNumeric(args.inputs[0].dtype, [&](auto zero) { result = ClipKernel<decltype(zero)>(args); });
  return result;
}

Expected<TensorKernel> MakeClipRowMajor(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype == DType::kBool) return UnsupportedDType(args, DType::kBool, "numeric types");
  return MakeViaF32(args, MakeClipF32OrOther);
}

}  // namespace

Expected<TensorKernel> MakeClipKernel(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedUnary(args, MakeClipRowMajor);
  return MakeClipRowMajor(args);
}

}  // namespace kiln::cpu
