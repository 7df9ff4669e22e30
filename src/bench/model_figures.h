// What a compiled model streams and computes per pass, for turning measured
// times into bandwidth and FLOP/s and comparing them with the roofline.
#pragma once

#include <cstdint>
#include <string>

#include "bench/roofline.h"
#include "core/dtype.h"

namespace kiln {
class CompiledModel;
struct ModelConfig;
}  // namespace kiln

namespace kiln::bench {

struct ModelFigures {
  // Bytes of every packed weight matrix (all linear layers and the LM
  // head): what one decode pass of a dense model streams from memory.
  int64_t weight_bytes = 0;
  // Of those, a mixture's experts', of which a token reads experts_per_token
  // of num_experts a layer.
  int64_t expert_bytes = 0;
  double experts_per_token_share = 0;  // experts_per_token / num_experts

  // The weight bytes a decode step of `batch` sequences reads: all but the
  // experts, and of these the expected share that at least one sequence
  // chooses (routing taken as uniform: 1 - (1 - k / E)^batch).
  double WeightBytesPerStep(int64_t batch) const;
  int64_t matrices = 0;
  // The packed layouts by share of bytes, e.g. "panel16-bf16 100%".
  std::string layouts;
  // The arithmetic most weight bytes run in (selects the compute peak).
  WeightArithmetic arithmetic = WeightArithmetic::kFp32;
  int threads = 0;
  // K and V bytes of one context token across all layers (cache dtype).
  double kv_bytes_per_token = 0;
};

ModelFigures DescribeModel(const CompiledModel& model, DType kv_dtype);

// The arithmetic a packed layout name implies ("panel16-bf16" -> bf16,
// names with q8/q4/q5/i8 -> int8, with f16 -> f16), fp32 otherwise.
WeightArithmetic ArithmeticOfLayout(const std::string& layout);

// The arithmetic of weights stored as `dtype` (block-quantized: int8).
WeightArithmetic ArithmeticOfDType(DType dtype);

}  // namespace kiln::bench
