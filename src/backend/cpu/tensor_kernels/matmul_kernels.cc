// The CPU's matrix products: MatMul, Gemm and Einsum. fp32 runs on kiln's
// linear kernels (packed_gemm.h) with B packed at compile time when it is a
// weight; other number types run the plain loops.
#include <algorithm>
#include <memory>
#include <vector>

#include "backend/cpu/tensor_kernels/bf16_compute.h"
#include "backend/cpu/tensor_kernels/einsum_kernel.h"
#include "backend/cpu/tensor_kernels/matmul_bf16.h"
#include "backend/cpu/tensor_kernels/packed_gemm.h"
#include "backend/cpu/tensor_kernels/scratch_alignment.h"
#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln::cpu {
namespace {

template <typename T>
TensorKernel ReferenceMatMulKernel(const MatMulShape& s) {
  auto shape = std::make_shared<MatMulShape>(s);
  TensorKernel k;
  k.impl = "reference";
  k.run = [shape](const TensorCall& call) {
    const MatMulShape& s = *shape;
    ReferenceBatchedMatMul<T>(s.batch, s.m, s.n, s.k, static_cast<const T*>(call.inputs[0]), s.a_index.data(),
                              s.m * s.k, s.k, 1, static_cast<const T*>(call.inputs[1]), s.b_index.data(),
                              s.k * s.n, s.n, 1, static_cast<T*>(call.outputs[0]));
    return Status::Ok();
  };
  return k;
}

// compute_dtype = "bf16" (bf16_compute.h) on oneDNN, for the shapes its
// matmul takes: A's matrices not broadcast, B one matrix or one per output
// matrix. Fails (the caller then runs fp32) otherwise.
Expected<TensorKernel> MakeBf16MatMul(const TensorKernelArgs& args, const MatMulShape& s, bool trans_b) {
  Bf16MatMulSpec spec;
  spec.batch = s.batch;
  spec.m = s.m;
  spec.n = s.n;
  spec.k = s.k;
  spec.trans_b = trans_b;
  for (int64_t i = 0; i < s.batch; ++i) {
    if (s.a_index[i] != i || (s.b_matrices > 1 && s.b_index[i] != i)) {
      return Unsupported("{} {}: bf16 takes no broadcast batch", args.op_type, args.node);
    }
  }
  spec.b_batch = s.b_matrices;
  if (spec.b_batch == 1) {  // one B: the batch is rows of one product
    spec.m *= spec.batch;
    spec.batch = 1;
  }
  if (args.constants.size() > 1 && args.constants[1] != nullptr) spec.b = args.constants[1]->As<float>();
  if (args.has(2)) spec.bias_input = 2;
  spec.slot = LaidOutSlot{args.laid_out, args.node};
  return MakeOneDnnBf16MatMul(spec);
}

// What the fp32 MatMul keeps between calls.
struct MatMulPlan {
  MatMulShape shape;
  std::vector<int64_t> a_offset;          // per output matrix, in floats
  std::vector<int64_t> b_offset;          // per B matrix, in floats (for packing at run time)
  std::shared_ptr<PackedWeightPanels> packed;  // B packed at compile time, or null
};

Expected<TensorKernel> MakeMatMul(const TensorKernelArgs& args) {
  const DType dtype = args.inputs[0].dtype;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> b_dims,
                        MatMulBDims(args.op_type, args.a(), args.inputs[1].dims));
  const bool trans_b = b_dims != args.inputs[1].dims;
  KILN_ASSIGN_OR_RETURN(MatMulShape s, MatMulShapeOf(args.op_type, args.node, args.inputs[0].dims, b_dims));
  if ((args.has(2) || trans_b) && dtype != DType::kF32)
    return Unsupported("{} with a bias: dtype {} (f32 only)", args.op_type, DTypeName(dtype));
  switch (dtype) {
    case DType::kF32: break;
    case DType::kF64: return ReferenceMatMulKernel<double>(s);
    case DType::kI32: return ReferenceMatMulKernel<int32_t>(s);
    case DType::kI64: return ReferenceMatMulKernel<int64_t>(s);
    default: return Unsupported("dtype {} not supported (f32, f64, i32, i64)", DTypeName(dtype));
  }
  KILN_ASSIGN_OR_RETURN(bool bf16, WantsBf16Compute(args));
  if (bf16 && CpuMultipliesBf16()) {
    auto kernel = MakeBf16MatMul(args, s, trans_b);
    if (kernel.ok()) return kernel;
  }
  // One B for every A matrix, the A matrices in order: one taller product
  // (a [197,1,192] x [192,576] projection is a 197x192 GEMM, not 197 GEMVs).
  bool a_in_order = s.a_matrices == s.batch;
  for (int64_t i = 0; i < s.batch && a_in_order; ++i) a_in_order = s.a_index[static_cast<size_t>(i)] == i;
  if (s.batch > 1 && s.b_matrices == 1 && a_in_order) {
    s.m *= s.batch;
    s.batch = 1;
    s.a_matrices = 1;
    s.a_index = {0};
    s.b_index = {0};
  }
  auto plan = std::make_shared<MatMulPlan>();
  plan->shape = s;
  for (int64_t i : s.a_index) plan->a_offset.push_back(i * s.m * s.k);
  for (int64_t i = 0; i < s.b_matrices; ++i) plan->b_offset.push_back(i * s.k * s.n);
  const int64_t packed_floats = PackedBFloats(s.k, s.n) * s.b_matrices;
  TensorKernel k;
  k.impl = PackedGemmImpl();
  // B's (k, n) element: B[k][n], or B[n][k] with trans_b.
  const int64_t stride_k = trans_b ? 1 : s.n, stride_n = trans_b ? s.k : 1;
  if (args.constants.size() > 1 && args.constants[1] != nullptr) {
    // A weight: packed once, here.
    const float* b = args.constants[1]->As<float>();
    plan->packed = std::make_shared<PackedWeightPanels>(
        args.laid_out, args.node, "kiln-matmul-panels", packed_floats, [&](float* dst) {
          PackBMatrices(KernelContext{}, b, plan->b_offset.data(), s.b_matrices, s.k, s.n, stride_k, stride_n,
                        1.0f, dst);
        });
    k.impl += " packed-weights";
  } else {
    k.scratch_bytes = AlignUp(static_cast<size_t>(packed_floats) * sizeof(float));
  }
  const bool has_bias = args.has(2);
  k.run = [plan, has_bias, stride_k, stride_n](const TensorCall& call) {
    const MatMulShape& s = plan->shape;
    KernelContext ctx{call.pool, BestIsa()};
    const float* packed = plan->packed ? plan->packed->data() : reinterpret_cast<float*>(call.scratch);
    if (!plan->packed) {
      PackBMatrices(ctx, static_cast<const float*>(call.inputs[1]), plan->b_offset.data(), s.b_matrices, s.k,
                    s.n, stride_k, stride_n, 1.0f, reinterpret_cast<float*>(call.scratch));
    }
    PackedGemm g;
    g.batch = s.batch;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.a = static_cast<const float*>(call.inputs[0]);
    g.lda = s.k;
    g.a_offset = plan->a_offset.data();
    g.packed = packed;
    g.b_index = s.b_index.data();
    g.bias = has_bias ? static_cast<const float*>(call.inputs[2]) : nullptr;
    g.c = static_cast<float*>(call.outputs[0]);
    g.ldc = s.n;
    g.c_stride = s.m * s.n;
    RunPackedGemm(ctx, g);
    return Status::Ok();
  };
  return k;
}

// Gemm: Y = alpha * A' B' + beta * C, A' = A or A^T, B' likewise.
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  std::vector<int64_t> c_dims;               // {} when there is no C (or beta is 0)
  bool c_is_row = false;                     // C broadcasts along rows only: the kernels' bias
  std::shared_ptr<PackedWeightPanels> packed;  // alpha * B' packed, when B is a weight
  std::shared_ptr<std::vector<float>> bias;  // beta * C as a row, when C is constant
  size_t a_bytes = 0, b_bytes = 0;           // scratch: A' copy, packed B
  bool has_c = false;
};

template <typename T>
void ReferenceGemm(const GemmPlan& p, const T* a, const T* b, const T* c, T* y) {
  const int64_t a_rs = p.trans_a ? 1 : p.k, a_cs = p.trans_a ? p.m : 1;
  const int64_t b_rs = p.trans_b ? 1 : p.n, b_cs = p.trans_b ? p.k : 1;
  const int64_t zero = 0;
  ReferenceBatchedMatMul<T>(1, p.m, p.n, p.k, a, &zero, 0, a_rs, a_cs, b, &zero, 0, b_rs, b_cs, y);
  const int64_t c_rows = p.c_dims.size() == 2 ? p.c_dims[0] : 1;
  const int64_t c_cols = p.c_dims.empty() ? 1 : p.c_dims.back();
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      double v = static_cast<double>(p.alpha) * static_cast<double>(y[r * p.n + j]);
      if (p.has_c) {
        v += static_cast<double>(p.beta) *
             static_cast<double>(c[(c_rows == 1 ? 0 : r) * c_cols + (c_cols == 1 ? 0 : j)]);
      }
      y[r * p.n + j] = static_cast<T>(v);
    }
  }
}

// Gemm with compute_dtype = "bf16": alpha * B' rounded to bf16 once (B must
// be a weight), beta * C as the bias row when C is a constant row, added in
// fp32 after the product otherwise.
Expected<TensorKernel> MakeBf16Gemm(const TensorKernelArgs& args, const std::shared_ptr<GemmPlan>& plan) {
  const GemmPlan& p = *plan;
  if (args.constants.size() < 2 || args.constants[1] == nullptr) {
    return Unsupported("{} {}: bf16 needs a constant B", args.op_type, args.node);
  }
  Bf16MatMulSpec spec;
  spec.m = p.m;
  spec.n = p.n;
  spec.k = p.k;
  spec.trans_a = p.trans_a;
  spec.trans_b = p.trans_b;
  spec.b = args.constants[1]->As<float>();
  spec.b_scale = p.alpha;
  const bool c_const = p.has_c && args.constants.size() > 2 && args.constants[2] != nullptr;
  std::vector<float> bias;
  const bool c_as_bias = p.has_c && p.c_is_row && c_const;
  if (c_as_bias) {
    const float* c = args.constants[2]->As<float>();
    const int64_t c_cols = p.c_dims.empty() ? 1 : p.c_dims.back();
    for (int64_t j = 0; j < p.n; ++j) bias.push_back(p.beta * c[c_cols == 1 ? 0 : j]);
    spec.bias = bias.data();
  }
  spec.slot = LaidOutSlot{args.laid_out, args.node};
  KILN_ASSIGN_OR_RETURN(TensorKernel product, MakeOneDnnBf16MatMul(spec));
  if (!p.has_c || c_as_bias) return product;
  TensorKernel k = product;
  k.run = [plan, run = product.run](const TensorCall& call) -> Status {
    KILN_RETURN_IF_ERROR(run(call));
    const GemmPlan& p = *plan;
    const auto* c = static_cast<const float*>(call.inputs[2]);
    auto* y = static_cast<float*>(call.outputs[0]);
    const int64_t c_rows = p.c_dims.size() == 2 ? p.c_dims[0] : 1;
    const int64_t c_cols = p.c_dims.empty() ? 1 : p.c_dims.back();
    for (int64_t r = 0; r < p.m; ++r) {
      for (int64_t j = 0; j < p.n; ++j) {
        y[r * p.n + j] += p.beta * c[(c_rows == 1 ? 0 : r) * c_cols + (c_cols == 1 ? 0 : j)];
      }
    }
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeGemm(const TensorKernelArgs& args) {
  const DType dtype = args.inputs[0].dtype;
  auto plan = std::make_shared<GemmPlan>();
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, CheckedIntAttrOr(args.a(), "transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, CheckedIntAttrOr(args.a(), "transB", 0));
  KILN_ASSIGN_OR_RETURN(double alpha, CheckedFloatAttrOr(args.a(), "alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(double beta, CheckedFloatAttrOr(args.a(), "beta", 1.0));
  GemmPlan& p = *plan;
  p.trans_a = trans_a != 0;
  p.trans_b = trans_b != 0;
  p.alpha = static_cast<float>(alpha);
  p.beta = static_cast<float>(beta);
  const auto& ad = args.inputs[0].dims;
  const auto& bd = args.inputs[1].dims;
  p.m = p.trans_a ? ad[1] : ad[0];
  p.k = p.trans_a ? ad[0] : ad[1];
  p.n = p.trans_b ? bd[0] : bd[1];
  p.has_c = args.has(2);
  if (p.has_c) {
    p.c_dims = args.inputs[2].dims;
    while (p.c_dims.size() > 1 && p.c_dims.front() == 1) p.c_dims.erase(p.c_dims.begin());
    if (p.c_dims.size() == 2 && p.c_dims[0] == 1) p.c_dims.erase(p.c_dims.begin());
    p.c_is_row = p.c_dims.size() <= 1;
  }
  if (dtype == DType::kF64) {
    TensorKernel k;
    k.impl = "reference";
    k.run = [plan](const TensorCall& call) {
      ReferenceGemm<double>(*plan, static_cast<const double*>(call.inputs[0]),
                            static_cast<const double*>(call.inputs[1]),
                            plan->has_c ? static_cast<const double*>(call.inputs[2]) : nullptr,
                            static_cast<double*>(call.outputs[0]));
      return Status::Ok();
    };
    return k;
  }
  if (dtype != DType::kF32) return Unsupported("dtype {} not supported (f32, f64)", DTypeName(dtype));
  KILN_ASSIGN_OR_RETURN(bool bf16, WantsBf16Compute(args));
  if (bf16 && CpuMultipliesBf16()) {
    auto kernel = MakeBf16Gemm(args, plan);
    if (kernel.ok()) return kernel;
  }

  TensorKernel k;
  k.impl = PackedGemmImpl();
  const int64_t b_stride_k = p.trans_b ? 1 : p.n, b_stride_n = p.trans_b ? p.k : 1;
  const int64_t packed_floats = PackedBFloats(p.k, p.n);
  if (args.constants.size() > 1 && args.constants[1] != nullptr) {
    const float* b = args.constants[1]->As<float>();
    p.packed = std::make_shared<PackedWeightPanels>(
        args.laid_out, args.node, "kiln-gemm-panels", packed_floats,
        [&](float* dst) { PackB(b, p.k, p.n, b_stride_k, b_stride_n, p.alpha, dst); });
    k.impl += " packed-weights";
  } else {
    p.b_bytes = AlignUp(static_cast<size_t>(packed_floats) * sizeof(float));
  }
  if (p.trans_a) p.a_bytes = AlignUp(static_cast<size_t>(p.m * p.k) * sizeof(float));
  const bool c_const = p.has_c && args.constants.size() > 2 && args.constants[2] != nullptr;
  if (p.has_c && p.c_is_row && c_const) {
    const float* c = args.constants[2]->As<float>();
    const int64_t c_cols = p.c_dims.empty() ? 1 : p.c_dims.back();
    p.bias = std::make_shared<std::vector<float>>(static_cast<size_t>(p.n));
    for (int64_t j = 0; j < p.n; ++j) (*p.bias)[static_cast<size_t>(j)] = p.beta * c[c_cols == 1 ? 0 : j];
  }
  const size_t bias_bytes =
      p.has_c && p.c_is_row && !c_const ? AlignUp(static_cast<size_t>(p.n) * sizeof(float)) : 0;
  k.scratch_bytes = p.a_bytes + p.b_bytes + bias_bytes;
  k.run = [plan, b_stride_k, b_stride_n](const TensorCall& call) {
    const GemmPlan& p = *plan;
    KernelContext ctx{call.pool, BestIsa()};
    uint8_t* scratch = call.scratch;
    const float* a = static_cast<const float*>(call.inputs[0]);
    const float* c = p.has_c ? static_cast<const float*>(call.inputs[2]) : nullptr;
    float* y = static_cast<float*>(call.outputs[0]);
    if (p.trans_a) {
      float* at = reinterpret_cast<float*>(scratch);
      PermuteCopy(a, {p.k, p.m}, {1, 0}, at);
      a = at;
      scratch += p.a_bytes;
    }
    const float* packed = p.packed ? p.packed->data() : reinterpret_cast<float*>(scratch);
    if (!p.packed) {
      PackB(static_cast<const float*>(call.inputs[1]), p.k, p.n, b_stride_k, b_stride_n, p.alpha,
            reinterpret_cast<float*>(scratch));
      scratch += p.b_bytes;
    }
    const float* bias = p.bias ? p.bias->data() : nullptr;
    if (p.has_c && p.c_is_row && !p.bias) {
      float* row = reinterpret_cast<float*>(scratch);
      const int64_t c_cols = p.c_dims.empty() ? 1 : p.c_dims.back();
      for (int64_t j = 0; j < p.n; ++j) row[j] = p.beta * c[c_cols == 1 ? 0 : j];
      bias = row;
    }
    const int64_t zero = 0;
    PackedGemm g;
    g.m = p.m;
    g.n = p.n;
    g.k = p.k;
    g.a = a;
    g.lda = p.k;
    g.a_offset = &zero;
    g.packed = packed;
    g.b_index = &zero;
    g.bias = bias;
    g.c = y;
    g.ldc = p.n;
    g.c_stride = p.m * p.n;
    RunPackedGemm(ctx, g);
    if (p.has_c && !p.c_is_row) {
      // C of [M, 1] or [M, N].
      const int64_t c_cols = p.c_dims.back();
      for (int64_t r = 0; r < p.m; ++r) {
        for (int64_t j = 0; j < p.n; ++j) y[r * p.n + j] += p.beta * c[r * c_cols + (c_cols == 1 ? 0 : j)];
      }
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddMatMulKernels(std::vector<TensorKernelEntry>* kernels) {
  kernels->push_back({"MatMul",
                      MakeMatMul,
                      {DType::kF32, DType::kF64, DType::kI32, DType::kI64},
                      "numpy batch broadcasting; f32 on the packed linear kernels"});
  kernels->push_back(
      {"kiln.FusedMatMul", MakeMatMul, {DType::kF32}, "MatMul (B transposed with trans_b) + bias row; f32"});
  kernels->push_back({"Gemm", MakeGemm, {DType::kF32, DType::kF64}, ""});
  kernels->push_back({"Einsum",
                      MakeEinsum,
                      {DType::kF32, DType::kF64, DType::kI32, DType::kI64},
                      "two-operand products as batched matmuls (f32); any other equation on plain loops"});
}

}  // namespace kiln::cpu
