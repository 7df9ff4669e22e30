// The quantized matrix products: MatMulInteger (int32 out), QLinearMatMul
// (requantized out) and kiln.QLinearMatMul (quant_ops.cc documents it).
// With a constant 2-d B whose values minus its zero points fit in
// [-127, 127], B is packed once for kiln's int8 GEMM kernels (w8a8/: AVX2
// maddubs, AVX-VNNI, AVX-512 VNNI), which compute each exact int32 sum of
// (a - c) (b - b_zp) with c = 128 for uint8 a, 0 for int8 a; the rest of
// (a - a_zp) is added back through the row sums of B. Otherwise (B at run
// time, batched, or out of range) A - a_zp and B - b_zp go through the fp32
// packed GEMM (RunFloatGemm says when its sums are exact). The plain int32
// loops are the reference both are tested against, and run MatMulInteger
// where fp32 sums would not be exact.
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/kernels/parallel.h"
#include "backend/cpu/tensor_kernels/int8_packed_b.h"
#include "backend/cpu/tensor_kernels/packed_gemm.h"
#include "backend/cpu/tensor_kernels/qmatmul_kernels.h"
#include "backend/cpu/tensor_kernels/quant_values.h"
#include "backend/cpu/tensor_kernels/scratch_alignment.h"
#include "backend/cpu/w8a8/int8_gemm.h"
#include "backend/cpu/w8a8/int8_weight.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln::cpu {
namespace {

enum class OutKind { kInt32, kQuantized, kFloat };

// Where each operand is among the op's inputs (-1: the op has none).
struct QSlots {
  int a = 0, a_scale = -1, a_zp = -1, b = 1, b_scale = -1, b_zp = -1, bias = -1, y_scale = -1, y_zp = -1;
};

QSlots SlotsFor(std::string_view op) {
  QSlots s;
  if (op == "MatMulInteger") {
    s.a_zp = 2;
    s.b_zp = 3;
  } else {
    s.a_scale = 1;
    s.a_zp = 2;
    s.b = 3;
    s.b_scale = 4;
    s.b_zp = 5;
    if (op == "QLinearMatMul") {
      s.y_scale = 6;
      s.y_zp = 7;
    } else {
      s.bias = 6;
      s.y_scale = 7;
      s.y_zp = 8;
    }
  }
  return s;
}

struct QMatMulPlan {
  MatMulShape shape;
  QSlots slots;
  OutKind out = OutKind::kInt32;
  DType a_type = DType::kU8, b_type = DType::kU8, out_type = DType::kI32;
  DType a_zp_type = DType::kU8, b_zp_type = DType::kU8, y_zp_type = DType::kU8;
  bool a_zp_per_row = false, b_zp_per_col = false, a_scale_per_row = false, b_scale_per_col = false;
  bool has_bias = false;
  Int8PackedB packed;  // B for the int8 GEMM (fast path only)
  // Scratch layout (bytes).
  size_t acc_bytes = 0, xq_bytes = 0, x_scale_bytes = 0, row_bytes = 0, y_bytes = 0;
  // The fp32 path (scratch bytes): A - a_zp, B - b_zp, B packed, the product.
  size_t fa_bytes = 0, fb_bytes = 0, fpacked_bytes = 0, fc_bytes = 0;
  std::vector<int64_t> a_offset, b_offset;
  std::vector<bool> present;  // per input slot: given by the node
};

// Input `slot` of the call, or null when the op has no such slot or the node omits it.
const void* In(const QMatMulPlan& p, const TensorCall& call, int slot) {
  return slot < 0 || static_cast<size_t>(slot) >= p.present.size() || !p.present[static_cast<size_t>(slot)]
             ? nullptr
             : call.inputs[slot];
}

float ReadScale(const QMatMulPlan& p, const TensorCall& call, int slot, int64_t i) {
  const void* v = In(p, call, slot);
  return v == nullptr ? 1.0f : static_cast<const float*>(v)[i];
}

// The int32 sums (a - a_zp)(b - b_zp) of every output element.
void ReferenceAccumulate(const QMatMulPlan& p, const TensorCall& call, int32_t* acc) {
  const MatMulShape& s = p.shape;
  const void* a = call.inputs[p.slots.a];
  const void* b = call.inputs[p.slots.b];
  for (int64_t i = 0; i < s.batch; ++i) {
    const int64_t a0 = s.a_index[static_cast<size_t>(i)] * s.m * s.k;
    const int64_t b0 = s.b_index[static_cast<size_t>(i)] * s.k * s.n;
    for (int64_t r = 0; r < s.m; ++r) {
      int32_t* row = acc + (i * s.m + r) * s.n;
      std::fill(row, row + s.n, 0);
      const int32_t az = ReadInt(p.a_zp_type, In(p, call, p.slots.a_zp), p.a_zp_per_row ? r : 0);
      for (int64_t kk = 0; kk < s.k; ++kk) {
        const int32_t av = ReadInt(p.a_type, a, a0 + r * s.k + kk) - az;
        for (int64_t j = 0; j < s.n; ++j) {
          const int32_t bz = ReadInt(p.b_zp_type, In(p, call, p.slots.b_zp), p.b_zp_per_col ? j : 0);
          row[j] += av * (ReadInt(p.b_type, b, b0 + kk * s.n + j) - bz);
        }
      }
    }
  }
}

// Rows [r0, r1) of the result from their float values real (= the
// dequantized product plus bias) into the output.
void StoreQuantized(const QMatMulPlan& p, const TensorCall& call, int64_t row, int64_t j0, int64_t j1,
                    const float* real) {
  const int64_t n = p.shape.n;
  const float y_scale = ReadScale(p, call, p.slots.y_scale, 0);
  const int32_t y_zp = ReadInt(p.y_zp_type, In(p, call, p.slots.y_zp), 0);
  for (int64_t j = j0; j < j1; ++j) {
    StoreInt8(p.out_type, call.outputs[0], row * n + j, SaturateRound(real[j] / y_scale, y_zp, p.out_type));
  }
}

Status RunReference(const QMatMulPlan& p, const TensorCall& call) {
  const MatMulShape& s = p.shape;
  const int64_t rows = s.batch * s.m;
  int32_t* acc = p.out == OutKind::kInt32 ? static_cast<int32_t*>(call.outputs[0])
                                          : reinterpret_cast<int32_t*>(call.scratch);
  ReferenceAccumulate(p, call, acc);
  if (p.out == OutKind::kInt32) return Status::Ok();
  float* real = reinterpret_cast<float*>(call.scratch + p.acc_bytes);
  const float* bias = p.has_bias ? static_cast<const float*>(call.inputs[p.slots.bias]) : nullptr;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t r = row % s.m;
    const float a_scale = ReadScale(p, call, p.slots.a_scale, p.a_scale_per_row ? r : 0);
    float* out = p.out == OutKind::kFloat ? static_cast<float*>(call.outputs[0]) + row * s.n : real;
    for (int64_t j = 0; j < s.n; ++j) {
      const float scale = a_scale * ReadScale(p, call, p.slots.b_scale, p.b_scale_per_col ? j : 0);
      out[j] = static_cast<float>(acc[row * s.n + j]) * scale + (bias != nullptr ? bias[j] : 0.0f);
    }
    if (p.out == OutKind::kQuantized) StoreQuantized(p, call, row, 0, s.n, real);
  }
  return Status::Ok();
}

Status RunInt8Gemm(const QMatMulPlan& p, const TensorCall& call) {
  const MatMulShape& s = p.shape;
  const Int8PackedB& pb = p.packed;
  const int64_t rows = s.batch * s.m, n = s.n, k = s.k, kp = pb.kp;
  const int64_t padded_n = pb.padded_n();
  KernelContext ctx{call.pool, BestIsa()};
  uint8_t* xq = call.scratch;
  float* x_scale = reinterpret_cast<float*>(call.scratch + p.xq_bytes);
  float* w_scale = reinterpret_cast<float*>(call.scratch + p.xq_bytes + p.x_scale_bytes);
  float* kbias = w_scale + padded_n;
  float* y = p.out == OutKind::kFloat
                 ? static_cast<float*>(call.outputs[0])
                 : reinterpret_cast<float*>(call.scratch + p.xq_bytes + p.x_scale_bytes + p.row_bytes);
  const bool a_unsigned = p.a_type == DType::kU8;
  const int32_t c = a_unsigned ? 128 : 0;
  const uint8_t pad = Int8KernelByte(a_unsigned ? 128 : 0, a_unsigned, pb.kernel);
  const uint8_t* a = static_cast<const uint8_t*>(call.inputs[p.slots.a]);
  ParallelRanges(ctx, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(kp, 1)),
                 [&](int64_t r0, int64_t r1, int) {
                   for (int64_t r = r0; r < r1; ++r) {
                     for (int64_t i = 0; i < k; ++i)
                       xq[r * kp + i] = Int8KernelByte(a[r * k + i], a_unsigned, pb.kernel);
                     for (int64_t i = k; i < kp; ++i) xq[r * kp + i] = pad;
                   }
                 });
  const bool ints = p.out == OutKind::kInt32;
  const float a_scale = ints ? 1.0f : ReadScale(p, call, p.slots.a_scale, 0);
  const int32_t az = ReadInt(p.a_zp_type, In(p, call, p.slots.a_zp), 0);
  const float* bias = p.has_bias ? static_cast<const float*>(call.inputs[p.slots.bias]) : nullptr;
  std::fill(x_scale, x_scale + rows, a_scale);
  for (int64_t j = 0; j < padded_n; ++j) {
    if (ints || j >= n) {
      w_scale[j] = 1.0f;
      kbias[j] = 0.0f;
      continue;
    }
    w_scale[j] = ReadScale(p, call, p.slots.b_scale, p.b_scale_per_col ? j : 0);
    kbias[j] = a_scale * w_scale[j] * static_cast<float>(static_cast<int64_t>(c - az) * pb.w_sum[j]) +
               (bias != nullptr ? bias[j] : 0.0f);
  }
  Int8Cell cell;
  cell.b = &pb;
  cell.xq = xq;
  cell.ldxq = kp;
  cell.x_scale = x_scale;
  cell.w_scale = w_scale;
  cell.bias = kbias;
  cell.y = y;
  cell.ldy = n;
  cell.sums = ints ? static_cast<int32_t*>(call.outputs[0]) : nullptr;
  ParallelGrid(ctx, rows, 8, pb.panels, 4, [&](int64_t r0, int64_t r1, int64_t p0, int64_t p1, int) {
    RunInt8Cell(cell, r0, r1, p0, p1);
    const int64_t j0 = p0 * kInt8PanelRows, j1 = std::min(n, p1 * kInt8PanelRows);
    for (int64_t r = r0; r < r1; ++r) {
      if (ints) {
        // Add (c - a_zp) times B's column sums.
        const int32_t row_az = ReadInt(p.a_zp_type, In(p, call, p.slots.a_zp), p.a_zp_per_row ? r % s.m : 0);
        int32_t* out = static_cast<int32_t*>(call.outputs[0]) + r * n;
        for (int64_t j = j0; j < j1; ++j) out[j] += (c - row_az) * pb.w_sum[j];
      } else if (p.out == OutKind::kQuantized) {
        StoreQuantized(p, call, r, j0, j1, y + r * n);
      }
    }
  });
  return Status::Ok();
}

// The products with both operands at run time (or weights the int8
// kernels cannot take): A - a_zp and B - b_zp as fp32, whose products and
// sums are exact integers while K * 255 * 255 < 2^24 (K <= 258), through the
// fp32 packed GEMM; beyond that the sums round as fp32 arithmetic does,
// which the requantized and fp32 outputs allow (MatMulInteger's exact int32
// output then takes the loops).
constexpr int64_t kExactFloatK = 258;

template <typename T>
void CenterRows(const T* x, int64_t rows, int64_t cols, const std::function<int32_t(int64_t, int64_t)>& zp,
                float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<float>(static_cast<int32_t>(x[r * cols + c]) - zp(r, c));
  }
}

Status RunFloatGemm(const QMatMulPlan& p, const TensorCall& call) {
  const MatMulShape& s = p.shape;
  KernelContext ctx{call.pool, BestIsa()};
  float* fa = reinterpret_cast<float*>(call.scratch);
  float* fb = reinterpret_cast<float*>(call.scratch + p.fa_bytes);
  float* packed = reinterpret_cast<float*>(call.scratch + p.fa_bytes + p.fb_bytes);
  float* fc = reinterpret_cast<float*>(call.scratch + p.fa_bytes + p.fb_bytes + p.fpacked_bytes);
  const void* a_zp = In(p, call, p.slots.a_zp);
  const void* b_zp = In(p, call, p.slots.b_zp);
  auto a_center = [&](int64_t row, int64_t) {
    return ReadInt(p.a_zp_type, a_zp, p.a_zp_per_row ? row % s.m : 0);
  };
  auto b_center = [&](int64_t, int64_t col) { return ReadInt(p.b_zp_type, b_zp, p.b_zp_per_col ? col : 0); };
  const int64_t a_rows = s.a_matrices * s.m;
  if (p.a_type == DType::kU8) {
    CenterRows(static_cast<const uint8_t*>(call.inputs[p.slots.a]), a_rows, s.k, a_center, fa);
  } else {
    CenterRows(static_cast<const int8_t*>(call.inputs[p.slots.a]), a_rows, s.k, a_center, fa);
  }
  const int64_t b_rows = s.b_matrices * s.k;
  if (p.b_type == DType::kU8) {
    CenterRows(static_cast<const uint8_t*>(call.inputs[p.slots.b]), b_rows, s.n, b_center, fb);
  } else {
    CenterRows(static_cast<const int8_t*>(call.inputs[p.slots.b]), b_rows, s.n, b_center, fb);
  }
  PackBMatrices(ctx, fb, p.b_offset.data(), s.b_matrices, s.k, s.n, s.n, 1, 1.0f, packed);
  PackedGemm g;
  g.batch = s.batch;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = fa;
  g.lda = s.k;
  g.a_offset = p.a_offset.data();
  g.packed = packed;
  g.b_index = s.b_index.data();
  g.c = fc;
  g.ldc = s.n;
  g.c_stride = s.m * s.n;
  RunPackedGemm(ctx, g);
  const int64_t rows = s.batch * s.m;
  if (p.out == OutKind::kInt32) {
    int32_t* out = static_cast<int32_t*>(call.outputs[0]);
    for (int64_t i = 0; i < rows * s.n; ++i) out[i] = static_cast<int32_t>(fc[i]);
    return Status::Ok();
  }
  const float* bias = p.has_bias ? static_cast<const float*>(call.inputs[p.slots.bias]) : nullptr;
  for (int64_t row = 0; row < rows; ++row) {
    const float a_scale = ReadScale(p, call, p.slots.a_scale, p.a_scale_per_row ? row % s.m : 0);
    float* real = fc + row * s.n;
    for (int64_t j = 0; j < s.n; ++j) {
      real[j] = real[j] * (a_scale * ReadScale(p, call, p.slots.b_scale, p.b_scale_per_col ? j : 0)) +
                (bias != nullptr ? bias[j] : 0.0f);
    }
    if (p.out == OutKind::kFloat) {
      std::copy(real, real + s.n, static_cast<float*>(call.outputs[0]) + row * s.n);
    } else {
      StoreQuantized(p, call, row, 0, s.n, real);
    }
  }
  return Status::Ok();
}

// Packs constant B for the int8 GEMM when its values fit; false leaves the plan on the loops.
bool PackForInt8Gemm(const TensorKernelArgs& args, QMatMulPlan* p) {
  const MatMulShape& s = p->shape;
  const TensorData* b =
      args.constants.size() > static_cast<size_t>(p->slots.b) ? args.constants[p->slots.b] : nullptr;
  if (b == nullptr || s.b_matrices != 1 || args.inputs[p->slots.b].rank() != 2) return false;
  if (s.batch * s.m == 0) return false;
  if (p->out != OutKind::kInt32 && (p->a_scale_per_row || p->a_zp_per_row)) return false;
  const TensorData* bz =
      p->slots.b_zp >= 0 && args.has(p->slots.b_zp) ? args.constants[p->slots.b_zp] : nullptr;
  if (p->slots.b_zp >= 0 && args.has(p->slots.b_zp) && bz == nullptr) return false;
  const DType b_type = p->b_type, zp_type = p->b_zp_type;
  const bool per_col = p->b_zp_per_col;
  const int64_t n = s.n;
  auto w = [&](int64_t j, int64_t kk) {
    const int32_t zp = bz != nullptr ? ReadInt(zp_type, bz->data(), per_col ? j : 0) : 0;
    return ReadInt(b_type, b->data(), kk * n + j) - zp;
  };
  return PackInt8BFor(args.laid_out, args.node, "kiln-int8", s.n, s.k, p->out == OutKind::kInt32, w, &p->packed);
}

Expected<TensorKernel> MakeQMatMulWith(const TensorKernelArgs& args, bool loops_only) {
  auto plan = std::make_shared<QMatMulPlan>();
  QMatMulPlan& p = *plan;
  p.slots = SlotsFor(args.op_type);
  KILN_ASSIGN_OR_RETURN(p.shape, MatMulShapeOf(args.op_type, args.node, args.inputs[p.slots.a].dims,
                                               args.inputs[p.slots.b].dims));
  const MatMulShape& s = p.shape;
  p.a_type = args.inputs[p.slots.a].dtype;
  p.b_type = args.inputs[p.slots.b].dtype;
  auto present = [&](int slot) { return slot >= 0 && args.has(static_cast<size_t>(slot)); };
  auto count = [&](int slot) { return present(slot) ? args.inputs[slot].ElementCount() : 1; };
  for (int slot : {p.slots.a_scale, p.slots.b_scale, p.slots.y_scale}) {
    if (present(slot) && args.inputs[slot].dtype != DType::kF32) {
      return Unsupported("scale dtype {} (f32 only)", DTypeName(args.inputs[slot].dtype));
    }
  }
  if (present(p.slots.a_zp)) p.a_zp_type = args.inputs[p.slots.a_zp].dtype;
  if (present(p.slots.b_zp)) p.b_zp_type = args.inputs[p.slots.b_zp].dtype;
  if (present(p.slots.a_zp) && p.a_zp_type != p.a_type)
    return InvalidArgument("a_zero_point's dtype differs from A's");
  if (present(p.slots.b_zp) && p.b_zp_type != p.b_type)
    return InvalidArgument("b_zero_point's dtype differs from B's");
  p.a_zp_per_row = count(p.slots.a_zp) > 1;
  p.a_scale_per_row = count(p.slots.a_scale) > 1;
  p.b_zp_per_col = count(p.slots.b_zp) > 1;
  p.b_scale_per_col = count(p.slots.b_scale) > 1;
  p.has_bias = present(p.slots.bias);
  p.out_type = args.outputs[0].dtype;
  p.out = p.out_type == DType::kI32   ? OutKind::kInt32
          : p.out_type == DType::kF32 ? OutKind::kFloat
                                      : OutKind::kQuantized;
  if (present(p.slots.y_zp)) p.y_zp_type = args.inputs[p.slots.y_zp].dtype;
  for (size_t i = 0; i < args.inputs.size(); ++i) p.present.push_back(args.has(i));

  const int64_t rows = s.batch * s.m;
  const size_t real_row = AlignUp(static_cast<size_t>(s.n) * sizeof(float));
  TensorKernel k;
  if (!loops_only && PackForInt8Gemm(args, &p)) {
    k.impl = std::string("kiln-int8-") + Int8KernelName(p.packed.kernel) + " packed-weights";
    p.xq_bytes = AlignUp(static_cast<size_t>(rows * p.packed.kp));
    p.x_scale_bytes = AlignUp(static_cast<size_t>(rows) * sizeof(float));
    p.row_bytes = AlignUp(static_cast<size_t>(2 * p.packed.padded_n()) * sizeof(float));
    p.y_bytes = p.out == OutKind::kFloat ? 0 : AlignUp(static_cast<size_t>(rows * s.n) * sizeof(float));
    k.scratch_bytes = p.xq_bytes + p.x_scale_bytes + p.row_bytes + p.y_bytes;
    k.run = [plan](const TensorCall& call) { return RunInt8Gemm(*plan, call); };
    return k;
  }
  if (!loops_only && (p.out != OutKind::kInt32 || s.k <= kExactFloatK)) {
    for (int64_t i : s.a_index) p.a_offset.push_back(i * s.m * s.k);
    for (int64_t i = 0; i < s.b_matrices; ++i) p.b_offset.push_back(i * s.k * s.n);
    p.fa_bytes = AlignUp(static_cast<size_t>(s.a_matrices * s.m * s.k) * sizeof(float));
    p.fb_bytes = AlignUp(static_cast<size_t>(s.b_matrices * s.k * s.n) * sizeof(float));
    p.fpacked_bytes = AlignUp(static_cast<size_t>(s.b_matrices * PackedBFloats(s.k, s.n)) * sizeof(float));
    p.fc_bytes = AlignUp(static_cast<size_t>(rows * s.n) * sizeof(float));
    k.impl = std::string(PackedGemmImpl()) + " fp32-of-int8";
    k.scratch_bytes = p.fa_bytes + p.fb_bytes + p.fpacked_bytes + p.fc_bytes;
    k.run = [plan](const TensorCall& call) { return RunFloatGemm(*plan, call); };
    return k;
  }
  k.impl = "reference";
  p.acc_bytes = p.out == OutKind::kInt32 ? 0 : AlignUp(static_cast<size_t>(rows * s.n) * sizeof(int32_t));
  k.scratch_bytes = p.acc_bytes + (p.out == OutKind::kQuantized ? real_row : 0);
  k.run = [plan](const TensorCall& call) { return RunReference(*plan, call); };
  return k;
}

Expected<TensorKernel> MakeQMatMul(const TensorKernelArgs& args) {
  return MakeQMatMulWith(args, false);
}

}  // namespace

Expected<TensorKernel> MakeQMatMulReference(const TensorKernelArgs& args) {
  return MakeQMatMulWith(args, true);
}

void AddQuantMatMulKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::string limits =
      "uint8/int8 operands; int8 GEMM kernels for a constant 2-d B (values minus zero point in [-127, 127])";
  kernels->push_back({"MatMulInteger", MakeQMatMul, {DType::kU8, DType::kI8}, limits});
  kernels->push_back({"QLinearMatMul", MakeQMatMul, {DType::kU8, DType::kI8}, limits});
  kernels->push_back(
      {"kiln.QLinearMatMul", MakeQMatMul, {DType::kU8, DType::kI8}, limits + "; per-tensor a"});
}

}  // namespace kiln::cpu
