// The precision policy of tensor graphs (see tensor_precision.h).
#include "compiler/tensor_precision.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "backend/backend.h"
#include "graph/tensor_ops/matmul_shape.h"

namespace kiln {
namespace {

bool IsConv(const std::string& op) {
  return op == "Conv" || op == "kiln.FusedConv";
}
bool IsMatMul(const std::string& op) {
  return op == "MatMul" || op == "kiln.FusedMatMul";
}
bool IsProduct(const std::string& op) {
  return IsConv(op) || IsMatMul(op) || op == "Gemm";
}
// Products with no bf16 kernel: they stay fp32 under every policy.
bool IsFp32OnlyProduct(const std::string& op) {
  return op == "ConvTranspose" || op == "Einsum";
}

bool IsConstant(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).constant != nullptr;
}
bool Present(const Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] != kNoValue;
}

// Why `n` stays fp32 as far as its own shape and operands go ("" when it
// can compute in bf16).
std::string ShapeReason(const Graph& g, const Node& n, Precision precision) {
  const Value& x = g.value(n.inputs[0]);
  if (x.dtype != DType::kF32 || n.inputs.size() < 2 || g.value(n.inputs[1]).dtype != DType::kF32) {
    return "inputs not f32";
  }
  if (IsConv(n.op_type)) {
    auto group = n.named_attrs.Has("group") ? n.named_attrs.Int("group") : Expected<int64_t>(1);
    if (!group.ok() || *group != 1) return "grouped or depthwise (memory-bound: bf16 would save nothing)";
    if (x.dims.size() != 3 && x.dims.size() != 4) return "not 1-d or 2-d";
    if (!IsConstant(g, n.inputs[1]) || (Present(n, 2) && !IsConstant(g, n.inputs[2]))) {
      return "weights or bias known only at run time";
    }
    return "";
  }
  if (n.op_type == "Gemm") {
    return IsConstant(g, n.inputs[1]) ? "" : "B known only at run time";
  }
  // MatMul: the forms the bf16 kernel takes: A not broadcast against B's batch.
  auto b_dims = MatMulBDims(n.op_type, n.named_attrs, g.value(n.inputs[1]).dims);
  if (!b_dims.ok()) return "B's shape unreadable";
  auto s = MatMulShapeOf(n.op_type, n.name, x.dims, *b_dims);
  if (!s.ok()) return "shapes unreadable";
  for (int64_t i = 0; i < s->batch; ++i) {
    if (s->a_index[i] != i || (s->b_matrices > 1 && s->b_index[i] != i)) return "A broadcast over B's batch";
  }
  if (!IsConstant(g, n.inputs[1]) && precision == Precision::kMixed) {
    return "two run-time operands (mixed takes only weight products to bf16; bf16 takes these too)";
  }
  return "";
}

// Why backend `b` does not multiply `n` in bf16 ("" when it does).
std::string BackendReason(const Graph& g, const Node& n, const Backend& b, const Backend& cpu) {
  if (&b == &cpu) {
    return b.has_bf16_tensor_products()
               ? ""
               : "this CPU multiplies no bf16 natively (no AVX-512 BF16 or AMX, or KILN_ISA caps "
                 "it)";
  }
  const SupportEntry* e = b.support().Match(g, n);
  auto has_bf16 = [](const std::vector<DType>& v) {
    return std::count(v.begin(), v.end(), DType::kBF16) > 0;
  };
  if (e != nullptr && (has_bf16(e->activation_dtypes) || has_bf16(e->weight_dtypes))) return "";
  return fmt::format("backend {} lists no bf16 for it", b.name());
}

// On the CPU, a product under this many FLOPs stays fp32: rounding its input
// to bf16 (and, for a convolution, reordering it to the blocked layout and
// back) costs more than the bf16 products save. Measured on Zen 4 (AVX-512
// BF16, 2 threads): MobileNetV3-Small's 1x1 convolutions and classifier GEMVs
// 8.0 -> 5.2 ms with this bound; YOLOv8n and ResNet-18 unchanged.
constexpr double kCpuBf16MinFlops = 5e6;

// "3 Conv, 1 Gemm".
std::string CountsText(const std::map<std::string, int>& counts) {
  std::string s;
  for (const auto& [op, count] : counts) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", count, op);
  return s;
}

}  // namespace

Status ApplyTensorPrecision(Graph& g, const BackendRegistry& backends, Precision precision,
                            std::vector<std::string>* report) {
  if (precision == Precision::kFp32) {
    report->push_back(
        "fp32: every op computes in fp32 (--precision mixed|bf16 multiplies convolutions and "
        "matmuls in bf16 where the backend does so natively)");
    return Status::Ok();
  }
  std::map<std::string, int> bf16;                         // op type -> count
  std::map<std::string, std::map<std::string, int>> fp32;  // reason -> op type -> count
  int others = 0;
  for (Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::kTensorOp) continue;
    if (IsFp32OnlyProduct(n.op_type)) {
      ++fp32["no bf16 kernel"][n.op_type];
      continue;
    }
    if (!IsProduct(n.op_type)) {
      ++others;
      continue;
    }
    std::string why = ShapeReason(g, n, precision);
    if (why.empty()) {
      Backend* b = backends.Find(n.backend);
      if (b == nullptr)
        return Internal("precision: node {} is placed on unknown backend '{}'", n.name, n.backend);
      why = BackendReason(g, n, *b, backends.cpu());
      if (why.empty() && b == &backends.cpu() &&
          EstimateCost(g, n, ShapeEnv{1, 1, 1, 1}).flops < kCpuBf16MinFlops) {
        why = fmt::format("under {} MFLOP (rounding the input costs more than bf16 saves)",
                          kCpuBf16MinFlops / 1e6);
      }
    }
    if (!why.empty()) {
      ++fp32[why][n.op_type];
      continue;
    }
    n.named_attrs.SetString("compute_dtype", "bf16");
    ++bf16[n.op_type];
  }
  const char* name = PrecisionName(precision);
  if (bf16.empty()) {
    report->push_back(fmt::format("{}: no product multiplies in bf16; every op computes in fp32", name));
  } else {
    report->push_back(
        fmt::format("{}: {} in bf16 (compute_dtype=bf16: weights stored bf16 at compile time, inputs "
                    "rounded to bf16, fp32 accumulation and outputs)",
                    name, CountsText(bf16)));
  }
  for (const auto& [why, counts] : fp32)
    report->push_back(fmt::format("fp32: {}: {}", CountsText(counts), why));
  report->push_back(
      fmt::format("fp32: the other {} ops (softmax, normalizations, elementwise, reductions, data "
                  "movement) and every value between ops",
                  others));
  return Status::Ok();
}

}  // namespace kiln
