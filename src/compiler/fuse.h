// Stage 3, fuse: pattern fusions on nodes placed on the same backend, and
// the precision policy.
//   - linears reading the same input become one linear with several weights
//     (q/k/v; gate/up), their outputs column views of one buffer;
//   - a gate/up linear feeding silu_mul becomes gate_up_silu_mul;
//   - a residual add followed by rms_norm becomes add_rms_norm.
// Precision: `fp32` keeps every activation fp32; `mixed` lets a matmul's
// input take its weight's dtype (bf16) where the backend multiplies bf16
// natively; `bf16` feeds every matmul bf16 inputs wherever the backend takes
// them. Norms, softmax, RoPE and accumulations stay fp32.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

enum class Precision { kFp32, kMixed, kBf16 };

const char* PrecisionName(Precision p);
Expected<Precision> ParsePrecision(std::string_view name);

struct FuseOptions {
  bool fuse_linears = true;
  bool fuse_gate_up_act = true;
  bool fuse_add_norm = true;
  Precision precision = Precision::kMixed;
};

struct FuseReport {
  std::vector<std::string> fusions;   // "qkv: model.layers.0.self_attn.{q,k,v}_proj"
  std::vector<std::string> precision; // decisions, one line each
  int casts_inserted = 0;
};

Status Fuse(Graph& g, const BackendRegistry& backends, const FuseOptions& options, FuseReport* report);

}  // namespace kiln
