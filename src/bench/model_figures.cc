// Reading the compile report's packed weights.
#include "bench/model_figures.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "compiler/compiled_model.h"
#include "format/model_config.h"

namespace kiln::bench {

WeightArithmetic ArithmeticOfLayout(const std::string& layout) {
  std::string l = layout;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* q : {"q8", "q4", "q5", "q6", "q3", "q2", "i8", "int8"}) {
    if (l.find(q) != std::string::npos) return WeightArithmetic::kInt8;
  }
  if (l.find("bf16") != std::string::npos) return WeightArithmetic::kBf16;
  if (l.find("f16") != std::string::npos) return WeightArithmetic::kF16;
  return WeightArithmetic::kFp32;
}

WeightArithmetic ArithmeticOfDType(DType dtype) {
  if (IsQuantized(dtype) || dtype == DType::kI8 || dtype == DType::kU8) return WeightArithmetic::kInt8;
  if (dtype == DType::kBF16) return WeightArithmetic::kBf16;
  if (dtype == DType::kF16) return WeightArithmetic::kF16;
  return WeightArithmetic::kFp32;
}

ModelFigures DescribeModel(const CompiledModel& model, DType kv_dtype) {
  ModelFigures f;
  const CompileReport& report = model.report();
  std::map<std::string, int64_t> by_layout;
  for (const PackedWeightInfo& p : report.layout.packed) {
    f.weight_bytes += static_cast<int64_t>(p.bytes);
    if (p.weight.find(".mlp.experts.") != std::string::npos) f.expert_bytes += static_cast<int64_t>(p.bytes);
    by_layout[p.layout] += static_cast<int64_t>(p.bytes);
    ++f.matrices;
  }
  std::vector<std::pair<int64_t, std::string>> shares;
  for (const auto& [layout, bytes] : by_layout) shares.emplace_back(bytes, layout);
  std::sort(shares.rbegin(), shares.rend());
  for (const auto& [bytes, layout] : shares) {
    if (!f.layouts.empty()) f.layouts += ", ";
    f.layouts += fmt::format("{} {:.0f}%", layout,
                             f.weight_bytes > 0 ? 100.0 * static_cast<double>(bytes) / static_cast<double>(f.weight_bytes) : 0.0);
  }
  if (!shares.empty()) f.arithmetic = ArithmeticOfLayout(shares.front().second);
  f.threads = report.threads;
  const ModelConfig& c = model.config();
  if (c.num_experts > 0) {
    f.experts_per_token_share = static_cast<double>(c.experts_per_token) / static_cast<double>(c.num_experts);
  }
  const DTypeInfo& kv = GetDTypeInfo(kv_dtype);
  f.kv_bytes_per_token =
      static_cast<double>(model.config().KvBytesPerToken(static_cast<double>(kv.block_bytes) / kv.block_size));
  return f;
}

double ModelFigures::WeightBytesPerStep(int64_t batch) const {
  const double chosen = 1.0 - std::pow(1.0 - experts_per_token_share, static_cast<double>(std::max<int64_t>(batch, 1)));
  return static_cast<double>(weight_bytes - expert_bytes) + static_cast<double>(expert_bytes) * chosen;
}

}  // namespace kiln::bench
