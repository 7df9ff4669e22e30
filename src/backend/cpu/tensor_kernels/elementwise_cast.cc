// Cast and CastLike between the plain dtypes: floats convert through
// double, integers through int64 (wrapping as C and numpy do); a float to
// an integer truncates toward zero, with NaN as 0 and out-of-range values
// saturated (C leaves those undefined).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/cpu/tensor_kernels/elementwise_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
struct Bool {
  uint8_t v;
};

template <typename T>
constexpr bool kIsFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BHalf>;

template <typename T>
double AsDouble(T x) {
  if constexpr (std::is_same_v<T, Half>) {
    return F16ToF32(x.bits);
  } else if constexpr (std::is_same_v<T, BHalf>) {
    return Bf16ToF32(x.bits);
  } else if constexpr (std::is_same_v<T, Bool>) {
    return x.v != 0 ? 1.0 : 0.0;
  } else {
    return static_cast<double>(x);
  }
}

template <typename T>
int64_t AsInt64(T x) {
  if constexpr (std::is_same_v<T, Bool>) {
    return x.v != 0 ? 1 : 0;
  } else {
    return static_cast<int64_t>(x);
  }
}

template <typename To>
To FromDouble(double v) {
  if constexpr (std::is_same_v<To, Half>) {
    return Half{F32ToF16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, BHalf>) {
    return BHalf{F32ToBf16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0.0)};
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    if (!(v == v)) return To(0);
    // Bounds as doubles: lowest is exact; max + 1 is a power of two.
    const double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    if (v >= hi) return std::numeric_limits<To>::max();
    if (v <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    return static_cast<To>(v);
  }
}

template <typename To>
To FromInt64(int64_t v) {
  if constexpr (std::is_same_v<To, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0)};
  } else if constexpr (kIsFloatLike<To>) {
    if constexpr (std::is_floating_point_v<To>) return static_cast<To>(v);
    return FromDouble<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));  // wraps
  }
}

template <typename From, typename To>
To Convert(From x) {
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, Half>) {
    return Half{F32ToF16(x)};
  } else if constexpr (std::is_same_v<From, Half> && std::is_same_v<To, float>) {
    return F16ToF32(x.bits);
  } else if constexpr (kIsFloatLike<From>) {
    return FromDouble<To>(AsDouble(x));
  } else {
    return FromInt64<To>(AsInt64(x));
  }
}

template <typename F>
bool VisitCastType(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); return true;
    case DType::kF64: f(double{}); return true;
    case DType::kF16: f(Half{}); return true;
    case DType::kBF16: f(BHalf{}); return true;
    case DType::kI64: f(int64_t{}); return true;
    case DType::kI32: f(int32_t{}); return true;
    case DType::kI16: f(int16_t{}); return true;
    case DType::kI8: f(int8_t{}); return true;
    case DType::kU8: f(uint8_t{}); return true;
    case DType::kBool: f(Bool{}); return true;
    default: return false;
  }
}

}  // namespace

Expected<TensorKernel> MakeCastKernel(const TensorKernelArgs& args) {
  const DType from = args.inputs[0].dtype;
  const DType to = args.outputs[0].dtype;
  const int64_t n = args.outputs[0].ElementCount();
  TensorKernel k;
  if (from == to) {
    const size_t bytes = args.outputs[0].Bytes();
    k.impl = "copy";
    k.run = [bytes](const TensorCall& call) {
      if (bytes > 0 && call.outputs[0] != call.inputs[0]) std::memcpy(call.outputs[0], call.inputs[0], bytes);
      return Status::Ok();
    };
    return k;
  }
  bool ok = false;
  VisitCastType(from, [&](auto src) {
    VisitCastType(to, [&](auto dst) {
      using From = decltype(src);
      using To = decltype(dst);
      ok = true;
      k.impl = "reference";
      k.run = [n](const TensorCall& call) {
        const From* x = static_cast<const From*>(call.inputs[0]);
        To* y = static_cast<To*>(call.outputs[0]);
        SplitRanges(call.pool, n, kParallelGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) y[i] = Convert<From, To>(x[i]);
        });
        return Status::Ok();
      };
    });
  });
  if (!ok) {
    return Unsupported("{} {}: cast from {} to {} is not supported", args.op_type, args.node, DTypeName(from),
                       DTypeName(to));
  }
  return k;
}

}  // namespace kiln::cpu
