// Reductions over axes: the Reduce* ops (accumulating in double for
// floats and int64 for integers), ArgMax/ArgMin, CumSum and TopK.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

#include "backend/cpu/tensor_kernels/broadcast_plan.h"
#include "backend/cpu/tensor_kernels/reduce_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"

namespace kiln::cpu {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

Expected<ReduceKind> KindOf(const TensorKernelArgs& args) {
  const std::string_view op = args.op_type;
  if (op == "ReduceSum") return ReduceKind::kSum;
  if (op == "ReduceMean") return ReduceKind::kMean;
  if (op == "ReduceMax") return ReduceKind::kMax;
  if (op == "ReduceMin") return ReduceKind::kMin;
  if (op == "ReduceProd") return ReduceKind::kProd;
  if (op == "ReduceL1") return ReduceKind::kL1;
  if (op == "ReduceL2") return ReduceKind::kL2;
  if (op == "ReduceLogSum") return ReduceKind::kLogSum;
  if (op == "ReduceLogSumExp") return ReduceKind::kLogSumExp;
  if (op == "ReduceSumSquare") return ReduceKind::kSumSquare;
  return Unsupported("{} {}: not a reduction", args.op_type, args.node);
}

// The input's dims with the reduced ones set to 1 (keepdims form), from
// the axes; shape inference has checked them.
std::vector<int64_t> KeepDimsShape(const std::vector<int64_t>& in, const std::vector<int64_t>& axes,
                                   bool noop) {
  std::vector<int64_t> out = in;
  if (axes.empty()) {
    if (!noop) std::fill(out.begin(), out.end(), 1);
    return out;
  }
  const int64_t rank = static_cast<int64_t>(in.size());
  for (int64_t a : axes) {
    if (rank == 0) continue;
    const int64_t axis = a < 0 ? a + rank : a;
    if (axis >= 0 && axis < rank) out[axis] = 1;
  }
  return out;
}

// Walks x (of the plan's output shape) once, calling step(acc[o], x, o)
// with o the reduced element the input element falls on.
template <typename T, typename A, typename Step>
void ReduceWalk(const BroadcastPlan& plan, const T* x, A* acc, Step step) {
  const int64_t n = plan.inner;
  BroadcastCursor cursor(plan, 0);
  for (int64_t r = 0; r < plan.rows; ++r, cursor.Next()) {
    const T* xr = x + r * n;
    const int64_t o = cursor.offset(0);
    if (plan.step[0] != 0) {
      for (int64_t i = 0; i < n; ++i) step(acc[o + i], xr[i], o + i);
    } else {
      A a = acc[o];
      for (int64_t i = 0; i < n; ++i) step(a, xr[i], o);
      acc[o] = a;
    }
  }
}

template <typename T>
Status RunReduce(ReduceKind kind, const BroadcastPlan& plan, int64_t in_n, int64_t out_n, const T* x, T* y,
                 uint8_t* scratch) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  const int64_t count = out_n == 0 ? 0 : in_n / out_n;
  if (kind == ReduceKind::kMax || kind == ReduceKind::kMin) {
    const bool is_max = kind == ReduceKind::kMax;
    T init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    if constexpr (kFloat)
      init = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    std::fill(y, y + out_n, init);
    if (is_max) {
      ReduceWalk(plan, x, y, [](T& a, T v, int64_t) { a = (v > a || v != v) ? v : a; });
    } else {
      ReduceWalk(plan, x, y, [](T& a, T v, int64_t) { a = (v < a || v != v) ? v : a; });
    }
    return Status::Ok();
  }
  // Sums and products: double for floats (and for the integer ops that
  // take roots or logs), int64 for integer sums and products.
  using A = std::conditional_t<kFloat, double, int64_t>;
  const bool exact_int =
      !kFloat && (kind == ReduceKind::kSum || kind == ReduceKind::kProd || kind == ReduceKind::kSumSquare ||
                  kind == ReduceKind::kMean || kind == ReduceKind::kL1);
  double* dacc = reinterpret_cast<double*>(scratch);
  A* acc = reinterpret_cast<A*>(scratch);
  auto to_t = [](double v) {
    if constexpr (kFloat) {
      return static_cast<T>(v);
    } else {
      if (!(v == v)) return T(0);
      if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
      if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
      return static_cast<T>(v);
    }
  };
  if (exact_int) {
    std::fill(acc, acc + out_n, kind == ReduceKind::kProd ? A(1) : A(0));
    switch (kind) {
      case ReduceKind::kProd: ReduceWalk(plan, x, acc, [](A& a, T v, int64_t) { a *= v; }); break;
      case ReduceKind::kSumSquare:
        ReduceWalk(plan, x, acc, [](A& a, T v, int64_t) { a += A(v) * A(v); });
        break;
      case ReduceKind::kL1:
        ReduceWalk(plan, x, acc, [](A& a, T v, int64_t) { a += v < 0 ? -A(v) : A(v); });
        break;
      default: ReduceWalk(plan, x, acc, [](A& a, T v, int64_t) { a += v; }); break;
    }
    for (int64_t o = 0; o < out_n; ++o) {
      A v = acc[o];
      if (kind == ReduceKind::kMean) v = count == 0 ? 0 : v / count;
      y[o] = static_cast<T>(v);
    }
    return Status::Ok();
  }
  std::fill(dacc, dacc + out_n, kind == ReduceKind::kProd ? 1.0 : 0.0);
  switch (kind) {
    case ReduceKind::kProd: ReduceWalk(plan, x, dacc, [](double& a, T v, int64_t) { a *= double(v); }); break;
    case ReduceKind::kL1:
      ReduceWalk(plan, x, dacc, [](double& a, T v, int64_t) { a += std::abs(double(v)); });
      break;
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      ReduceWalk(plan, x, dacc, [](double& a, T v, int64_t) { a += double(v) * double(v); });
      break;
    case ReduceKind::kLogSumExp: {
      double* mx = dacc + out_n;
      std::fill(mx, mx + out_n, -std::numeric_limits<double>::infinity());
      ReduceWalk(plan, x, mx, [](double& a, T v, int64_t) { a = std::max(a, double(v)); });
      ReduceWalk(plan, x, dacc, [mx](double& a, T v, int64_t o) {
        // An all -inf (or +inf) slice has no finite shift; its exps are then taken unshifted.
        const double shift = std::isfinite(mx[o]) ? mx[o] : 0.0;
        a += std::exp(double(v) - shift);
      });
      for (int64_t o = 0; o < out_n; ++o) {
        const double shift = std::isfinite(mx[o]) ? mx[o] : 0.0;
        y[o] = to_t(shift + std::log(dacc[o]));
      }
      return Status::Ok();
    }
    default: ReduceWalk(plan, x, dacc, [](double& a, T v, int64_t) { a += double(v); }); break;
  }
  for (int64_t o = 0; o < out_n; ++o) {
    double v = dacc[o];
    if (kind == ReduceKind::kMean)
      v = count == 0 ? std::numeric_limits<double>::quiet_NaN() : v / double(count);
    if (kind == ReduceKind::kL2) v = std::sqrt(v);
    if (kind == ReduceKind::kLogSum) v = std::log(v);
    y[o] = to_t(v);
  }
  return Status::Ok();
}

Expected<TensorKernel> MakeReduceWide(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(ReduceKind kind, KindOf(args));
  const DType t = args.inputs[0].dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kI64 && t != DType::kI32) {
    return UnsupportedDType(args, t, "f32, f16, f64, i64, i32");
  }
  const bool noop = IntAttrOr(args, "noop_with_empty_axes", 0) != 0;
  const bool axes_input = args.has(1);
  std::vector<int64_t> attr_axes;
  if (!axes_input && args.a().Has("axes")) {
    KILN_ASSIGN_OR_RETURN(attr_axes, args.a().Ints("axes"));
  }
  const std::vector<int64_t> in_dims = args.inputs[0].dims;
  const int64_t in_n = args.inputs[0].ElementCount();
  const int64_t out_n = args.outputs[0].ElementCount();
  // Axes given as an input are read at run time unless known now.
  std::optional<BroadcastPlan> fixed;
  if (!axes_input) {
    fixed = MakeBroadcastPlan(in_dims, {KeepDimsShape(in_dims, attr_axes, noop)});
  } else if (args.constants[1] != nullptr) {
    KILN_ASSIGN_OR_RETURN(auto axes, args.constants[1]->ToInt64s());
    fixed = MakeBroadcastPlan(in_dims, {KeepDimsShape(in_dims, axes, noop)});
  }
  const int64_t axes_count = axes_input ? args.inputs[1].ElementCount() : 0;
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  k.scratch_bytes = static_cast<size_t>(2 * out_n) * 8;
  k.run = [=](const TensorCall& call) -> Status {
    BroadcastPlan plan;
    if (fixed) {
      plan = *fixed;
    } else {
      const int64_t* a = static_cast<const int64_t*>(call.inputs[1]);
      std::vector<int64_t> axes(a, a + axes_count);
      const std::vector<int64_t> keep = KeepDimsShape(in_dims, axes, noop);
      int64_t n = 1;
      for (int64_t d : keep) n *= d;
      if (n != out_n)
        return InvalidArgument("{} {}: the axes input changed since the shapes were inferred", op, node);
      plan = MakeBroadcastPlan(in_dims, {keep});
    }
    Status status = Status::Ok();
    VisitNumeric(t, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, int32_t>) {
        status = RunReduce<T>(kind, plan, in_n, out_n, static_cast<const T*>(call.inputs[0]),
                              static_cast<T*>(call.outputs[0]), call.scratch);
      }
    });
    return status;
  };
  return k;
}

// Calls f(T{}) for the dtypes the arg and sort kernels take.
template <typename F>
bool VisitOrdered(DType t, F&& f) {
  if (t == DType::kBool) return false;
  return VisitNumeric(t, f);
}

}  // namespace

Expected<TensorKernel> MakeReduceKernel(const TensorKernelArgs& args) {
  if (args.has(1) && args.inputs[1].dtype != DType::kI64) {
    return InvalidArgument("{} {}: axes are {}, not i64", args.op_type, args.node,
                           DTypeName(args.inputs[1].dtype));
  }
  return MakeViaF32(args, MakeReduceWide);
}

namespace {

Expected<TensorKernel> MakeArgReduceWide(const TensorKernelArgs& args) {
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = IntAttrOr(args, "axis", 0);
  if (axis < 0) axis += rank;
  const AxisView v = ViewAround(dims, axis, axis + 1);
  const bool is_max = args.op_type == "ArgMax";
  const bool last = IntAttrOr(args, "select_last_index", 0) != 0;
  TensorKernel k;
  k.impl = "reference";
  bool ok = VisitOrdered(args.inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    k.run = [v, is_max, last](const TensorCall& call) {
      const T* x = static_cast<const T*>(call.inputs[0]);
      int64_t* y = static_cast<int64_t*>(call.outputs[0]);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t j = 0; j < v.inner; ++j) {
          const T* p = x + o * v.axis * v.inner + j;
          int64_t best = 0;
          T best_v = p[0];
          for (int64_t a = 1; a < v.axis; ++a) {
            const T cur = p[a * v.inner];
            const bool better =
                is_max ? (last ? cur >= best_v : cur > best_v) : (last ? cur <= best_v : cur < best_v);
            if (better) {
              best = a;
              best_v = cur;
            }
          }
          y[o * v.inner + j] = best;
        }
      }
      return Status::Ok();
    };
  });
  if (!ok) return UnsupportedDType(args, args.inputs[0].dtype, "numeric types");
  return k;
}

}  // namespace

Expected<TensorKernel> MakeArgReduceKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeArgReduceWide);
}

namespace {

Expected<TensorKernel> MakeCumSumWide(const TensorKernelArgs& args) {
  const auto dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  const bool exclusive = IntAttrOr(args, "exclusive", 0) != 0;
  const bool reverse = IntAttrOr(args, "reverse", 0) != 0;
  const DType axis_type = args.inputs[1].dtype;
  if (axis_type != DType::kI64 && axis_type != DType::kI32) {
    return InvalidArgument("{} {}: axis is {}, not i32 or i64", args.op_type, args.node,
                           DTypeName(axis_type));
  }
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  bool ok = false;
  VisitNumeric(args.inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                  std::is_same_v<T, int32_t>) {
      ok = true;
      k.run = [=](const TensorCall& call) -> Status {
        int64_t axis = axis_type == DType::kI64 ? *static_cast<const int64_t*>(call.inputs[1])
                                                : *static_cast<const int32_t*>(call.inputs[1]);
        if (axis < -rank || axis >= rank) {
          return InvalidArgument("{} {}: axis {} is out of range for rank {}", op, node, axis, rank);
        }
        if (axis < 0) axis += rank;
        const AxisView v = ViewAround(dims, axis, axis + 1);
        const T* x = static_cast<const T*>(call.inputs[0]);
        T* y = static_cast<T*>(call.outputs[0]);
        using A = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        for (int64_t o = 0; o < v.outer; ++o) {
          for (int64_t j = 0; j < v.inner; ++j) {
            const int64_t base = o * v.axis * v.inner + j;
            A sum = 0;
            for (int64_t s = 0; s < v.axis; ++s) {
              const int64_t a = reverse ? v.axis - 1 - s : s;
              const int64_t at = base + a * v.inner;
              const T v = x[at];  // read before the write: y may be x
              if (exclusive) {
                y[at] = static_cast<T>(sum);
                sum += v;
              } else {
                sum += v;
                y[at] = static_cast<T>(sum);
              }
            }
          }
        }
        return Status::Ok();
      };
    }
  });
  if (!ok) return UnsupportedDType(args, args.inputs[0].dtype, "f32, f16, f64, i64, i32");
  return k;
}

}  // namespace

Expected<TensorKernel> MakeCumSumKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeCumSumWide);
}

namespace {

Expected<TensorKernel> MakeTopKWide(const TensorKernelArgs& args) {
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t axis = IntAttrOr(args, "axis", -1);
  if (axis < 0) axis += rank;
  const AxisView v = ViewAround(dims, axis, axis + 1);
  const int64_t k_count = args.outputs[0].dims[axis];
  const bool largest = IntAttrOr(args, "largest", 1) != 0;
  TensorKernel k;
  k.impl = "reference";
  k.scratch_bytes = static_cast<size_t>(v.axis) * sizeof(int64_t);
  bool ok = VisitOrdered(args.inputs[0].dtype, [&](auto zero) {
    using T = decltype(zero);
    k.run = [v, k_count, largest](const TensorCall& call) {
      const T* x = static_cast<const T*>(call.inputs[0]);
      T* values = static_cast<T*>(call.outputs[0]);
      int64_t* indices = static_cast<int64_t*>(call.outputs[1]);
      int64_t* order = reinterpret_cast<int64_t*>(call.scratch);
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t j = 0; j < v.inner; ++j) {
          const T* p = x + o * v.axis * v.inner + j;
          std::iota(order, order + v.axis, int64_t{0});
          // Ties go to the lower index; NaN counts as the largest value.
          auto before = [&](int64_t a, int64_t b) {
            const T va = p[a * v.inner], vb = p[b * v.inner];
            const bool na = va != va, nb = vb != vb;
            if (na || nb) {
              if (na && nb) return a < b;
              return largest ? na : nb;
            }
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(order, order + k_count, order + v.axis, before);
          for (int64_t s = 0; s < k_count; ++s) {
            const int64_t at = o * k_count * v.inner + s * v.inner + j;
            values[at] = p[order[s] * v.inner];
            indices[at] = order[s];
          }
        }
      }
      return Status::Ok();
    };
  });
  if (!ok) return UnsupportedDType(args, args.inputs[0].dtype, "numeric types");
  return k;
}

}  // namespace

Expected<TensorKernel> MakeTopKKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeTopKWide);
}

}  // namespace kiln::cpu
