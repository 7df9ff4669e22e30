// Softmax, LogSoftmax and Hardmax (f32; f16 through f32). Opset < 13
// flattens the input to 2-d at `axis` and works on whole rows; from 13 the
// op runs along `axis` alone. Contiguous rows (the last axis, or any
// flattened form) go through the vector table; other axes are walked as
// [outer, axis, inner] blocks, inner elements side by side.
#include <cmath>
#include <limits>

#include "backend/cpu/tensor_kernels/reduce_kernels.h"
#include "backend/cpu/tensor_kernels/tensor_kernel_util.h"
#include "backend/cpu/tensor_kernels/tensor_vec.h"

namespace kiln::cpu {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// Softmax over the middle axis of one [axis, inner] block, for inner
// columns [jb, je): every step is a loop over contiguous columns (the
// exponentials through the vector table), so a channel softmax such as a
// detector's distribution head runs at vector speed. `stats` holds 3 *
// stride floats, of which this call uses columns [jb, je).
void StridedSoftmax(const TensorVecTable& vec, const float* x, float* y, int64_t axis, int64_t stride,
                    int64_t jb, int64_t je, bool log, float* stats) {
  const int64_t n = je - jb;
  float* mx = stats + jb;
  float* sum = stats + stride + jb;
  float* e = stats + 2 * stride + jb;
  for (int64_t j = 0; j < n; ++j) {
    mx[j] = -std::numeric_limits<float>::infinity();
    sum[j] = 0.0f;
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = x + a * stride + jb;
    for (int64_t j = 0; j < n; ++j) mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = x + a * stride + jb;
    float* out = y + a * stride + jb;
    for (int64_t j = 0; j < n; ++j) out[j] = row[j] - mx[j];
    float* exps = log ? e : out;
    vec.unary(VecUnaryOp::kExp, 0.0f, 0.0f, out, exps, n);
    for (int64_t j = 0; j < n; ++j) sum[j] += exps[j];
  }
  if (log) {
    for (int64_t j = 0; j < n; ++j) sum[j] = std::log(sum[j]);
    for (int64_t a = 0; a < axis; ++a) {
      float* out = y + a * stride + jb;
      for (int64_t j = 0; j < n; ++j) out[j] -= sum[j];
    }
  } else {
    for (int64_t j = 0; j < n; ++j) sum[j] = 1.0f / sum[j];
    for (int64_t a = 0; a < axis; ++a) {
      float* out = y + a * stride + jb;
      for (int64_t j = 0; j < n; ++j) out[j] *= sum[j];
    }
  }
}

// 1 at the first largest element along the axis, 0 elsewhere.
void Hardmax(const float* x, float* y, int64_t axis, int64_t inner) {
  for (int64_t j = 0; j < inner; ++j) {
    int64_t best = 0;
    for (int64_t a = 1; a < axis; ++a) {
      if (x[a * inner + j] > x[best * inner + j]) best = a;
    }
    for (int64_t a = 0; a < axis; ++a) y[a * inner + j] = a == best ? 1.0f : 0.0f;
  }
}

Expected<TensorKernel> MakeSoftmaxF32(const TensorKernelArgs& args) {
  if (args.inputs[0].dtype != DType::kF32) return UnsupportedDType(args, args.inputs[0].dtype, "f32 and f16");
  const Kind kind = args.op_type == "Softmax"      ? Kind::kSoftmax
                    : args.op_type == "LogSoftmax" ? Kind::kLogSoftmax
                                                   : Kind::kHardmax;
  const auto& dims = args.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int opset = args.opset;
  int64_t axis = IntAttrOr(args, "axis", opset < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  const AxisView v = opset < 13 ? ViewAround(dims, axis, rank) : ViewAround(dims, axis, axis + 1);
  TensorKernel k;
  const bool rows = v.inner == 1;
  k.impl = kind != Kind::kHardmax ? std::string("kiln-") + IsaName(TensorVec().isa) : "reference";
  k.scratch_bytes = 3 * static_cast<size_t>(v.inner) * sizeof(float);
  k.run = [v, kind, rows](const TensorCall& call) {
    const float* x = static_cast<const float*>(call.inputs[0]);
    float* y = static_cast<float*>(call.outputs[0]);
    const int64_t block = v.axis * v.inner;
    if (kind == Kind::kHardmax) {
      for (int64_t o = 0; o < v.outer; ++o) Hardmax(x + o * block, y + o * block, v.axis, v.inner);
      return Status::Ok();
    }
    const bool log = kind == Kind::kLogSoftmax;
    if (rows) {
      const TensorVecTable& vec = TensorVec();
      const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(v.axis, 1));
      SplitRanges(call.pool, v.outer, grain, [&](int64_t b, int64_t e) {
        vec.softmax_rows(x + b * v.axis, y + b * v.axis, e - b, v.axis, log);
      });
      return Status::Ok();
    }
    // Strided: block by block, the columns of a block split over the pool
    // (each piece uses its own columns of the statistics).
    float* stats = reinterpret_cast<float*>(call.scratch);
    const TensorVecTable& vec = TensorVec();
    const int64_t grain = std::max<int64_t>(64, kParallelGrain / std::max<int64_t>(v.axis, 1));
    for (int64_t o = 0; o < v.outer; ++o) {
      SplitRanges(call.pool, v.inner, grain, [&](int64_t jb, int64_t je) {
        StridedSoftmax(vec, x + o * block, y + o * block, v.axis, v.inner, jb, je, log, stats);
      });
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

Expected<TensorKernel> MakeSoftmaxKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeSoftmaxF32);
}

}  // namespace kiln::cpu
