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

// Softmax over the middle axis of one [axis, inner] block, all inner
// columns at once; stats holds 2 * inner floats.
void StridedSoftmax(const float* x, float* y, int64_t axis, int64_t inner, bool log, float* stats) {
  float* mx = stats;
  float* sum = stats + inner;
  for (int64_t j = 0; j < inner; ++j) {
    mx[j] = -std::numeric_limits<float>::infinity();
    sum[j] = 0.0f;
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = x + a * inner;
    for (int64_t j = 0; j < inner; ++j) mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  for (int64_t a = 0; a < axis; ++a) {
    const float* row = x + a * inner;
    float* out = y + a * inner;
    for (int64_t j = 0; j < inner; ++j) {
      const float e = std::exp(row[j] - mx[j]);
      sum[j] += e;
      if (!log) out[j] = e;
    }
  }
  if (log) {
    for (int64_t j = 0; j < inner; ++j) sum[j] = std::log(sum[j]);
    for (int64_t a = 0; a < axis; ++a) {
      for (int64_t j = 0; j < inner; ++j) y[a * inner + j] = (x[a * inner + j] - mx[j]) - sum[j];
    }
  } else {
    for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0f / sum[j];
    for (int64_t a = 0; a < axis; ++a) {
      for (int64_t j = 0; j < inner; ++j) y[a * inner + j] *= sum[j];
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
  k.impl = rows && kind != Kind::kHardmax ? std::string("kiln-") + IsaName(TensorVec().isa) : "reference";
  const int threads = args.num_threads;
  k.scratch_bytes = static_cast<size_t>(std::max(threads, 1)) * 2 * v.inner * sizeof(float) + 64;
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
      ParallelRanges(call.pool, v.outer, grain, [&](int64_t b, int64_t e) {
        vec.softmax_rows(x + b * v.axis, y + b * v.axis, e - b, v.axis, log);
      });
      return Status::Ok();
    }
    // Strided: one block at a time on this thread (stats in scratch).
    float* stats = reinterpret_cast<float*>(call.scratch);
    for (int64_t o = 0; o < v.outer; ++o)
      StridedSoftmax(x + o * block, y + o * block, v.axis, v.inner, log, stats);
    return Status::Ok();
  };
  return k;
}

}  // namespace

Expected<TensorKernel> MakeSoftmaxKernel(const TensorKernelArgs& args) {
  return MakeViaF32(args, MakeSoftmaxF32);
}

}  // namespace kiln::cpu
