// Stage 3's precision policy for tensor (ONNX) graphs (core/precision.h's
// names):
//   fp32:  every op computes in fp32 (the default);
//   mixed: the products with a constant weight (Conv, kiln.FusedConv with
//          dense weights, MatMul, kiln.FusedMatMul and Gemm on a weight)
//          multiply in bf16 where their backend multiplies bf16 natively;
//   bf16:  those, and the matrix products of two run-time operands
//          (attention's Q K^T and scores V).
// A chosen node gets the attribute compute_dtype = "bf16": its kernel stores
// the weight in bf16 once, rounds its inputs to bf16, accumulates in fp32 and
// writes fp32, so every value between nodes stays fp32 and softmax,
// normalizations, elementwise ops and reductions compute in fp32 under every
// policy. On the CPU a product under 5 MFLOP stays fp32 too (converting its
// input costs more than bf16 saves). Where the backend does not multiply bf16 natively (a CPU without
// AVX-512 BF16 or AMX, KILN_ISA=avx2, a plugin whose support list has no
// bf16 for the op) the nodes stay fp32 and the report says why: the same
// command works on every machine, and the plan shows what ran.
#pragma once

#include <string>
#include <vector>

#include "core/precision.h"
#include "core/status.h"
#include "graph/graph.h"

namespace kiln {

class BackendRegistry;

// Marks the nodes of `g` (placed by legalize) that compute in bf16 under
// `precision`; appends one line per kind of decision to `report`.
Status ApplyTensorPrecision(Graph& g, const BackendRegistry& backends, Precision precision,
                            std::vector<std::string>* report);

}  // namespace kiln
