// Stage 3, fuse: pattern fusions on nodes placed on the same backend, and
// the precision policy.
//   - linears reading the same input become one linear with several weights
//     (q/k/v; gate/up), their outputs column views of one buffer;
//   - a gate/up linear feeding silu_mul becomes gate_up_silu_mul;
//   - a residual add followed by rms_norm becomes add_rms_norm.
// A fused node carries the named attributes of the nodes it replaces
// (nodes whose attributes disagree are not fused). The precision policy is
// core/precision.h's.
#pragma once

#include <string>
#include <vector>

#include "core/precision.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

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
