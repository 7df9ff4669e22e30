// The scalar reference table of the tensor vector kernels, and the choice
// of table by ISA.
#include "backend/cpu/tensor_kernels/tensor_vec.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cpu {
namespace ref {
namespace {

// v clamped to [0, 1]; NaN stays NaN (as numpy's clip).
float Clamp01(float v) {
  return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

float Unary(VecUnaryOp op, float alpha, float beta, float x) {
  switch (op) {
    case VecUnaryOp::kRelu: return x < 0.0f ? 0.0f : x;
    case VecUnaryOp::kLeakyRelu: return x < 0.0f ? alpha * x : x;
    case VecUnaryOp::kHardSigmoid: return Clamp01(alpha * x + beta);
    case VecUnaryOp::kHardSwish: return x * Clamp01(x / 6.0f + 0.5f);
    case VecUnaryOp::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case VecUnaryOp::kSilu: return x / (1.0f + std::exp(-x));
    case VecUnaryOp::kTanh: return std::tanh(x);
    case VecUnaryOp::kExp: return std::exp(x);
    case VecUnaryOp::kErf: return std::erf(x);
    case VecUnaryOp::kGelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case VecUnaryOp::kGeluTanh: {
      const float u = 0.797884560802865356f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + std::tanh(u));
    }
  }
  return x;
}

void UnaryRef(VecUnaryOp op, float alpha, float beta, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Unary(op, alpha, beta, x[i]);
}

void BinaryRef(VecBinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step, float* out,
               int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = a[i * a_step];
    const float y = b[i * b_step];
    switch (op) {
      case VecBinaryOp::kAdd: out[i] = x + y; break;
      case VecBinaryOp::kSub: out[i] = x - y; break;
      case VecBinaryOp::kMul: out[i] = x * y; break;
      case VecBinaryOp::kDiv: out[i] = x / y; break;
    }
  }
}

void SoftmaxRowsRef(const float* x, float* y, int64_t rows, int64_t cols, bool log) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) max = std::max(max, xr[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(xr[c]) - max);
    for (int64_t c = 0; c < cols; ++c) {
      const double shifted = static_cast<double>(xr[c]) - max;
      yr[c] = static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
    }
  }
}

void LayerNormRowsRef(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                      int64_t cols, float epsilon, float* mean_out, float* inv_std_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mean = sum / static_cast<double>(cols);
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) sq += (xr[c] - mean) * (xr[c] - mean);
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(cols) + epsilon);
    if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
    if (inv_std_out != nullptr) inv_std_out[r] = static_cast<float>(inv_std);
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = static_cast<float>((xr[c] - mean) * inv_std * scale[c] + (bias != nullptr ? bias[c] : 0.0f));
    }
  }
}

}  // namespace

const TensorVecTable& TensorVecTableRef() {
  static constexpr TensorVecTable kTable = {Isa::kScalar, &BinaryRef, &UnaryRef, &SoftmaxRowsRef,
                                            &LayerNormRowsRef};
  return kTable;
}

}  // namespace ref

const TensorVecTable& TensorVecFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512::TensorVecTableAvx512();
    case Isa::kAvx2: return avx2::TensorVecTableAvx2();
    case Isa::kScalar: break;
  }
  return ref::TensorVecTableRef();
}

const TensorVecTable& TensorVec() {
  static const TensorVecTable& table = TensorVecFor(BestIsa());
  return table;
}

}  // namespace kiln::cpu
