// What the CPU binders' kernel calls read at run time: a value's rows in
// this pass, its memory as floats (the caller's logits for the graph
// output), the threads, a layer's KV cache; and the checks binders share.
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/cpu/kernels/kernel_context.h"
#include "backend/cpu/kernels/kv_cache.h"
#include "core/status.h"

namespace kiln::cpu {

// The threads of this pass, with the best ISA.
KernelContext ContextOf(const RunState& s);

// Rows of a value in this pass.
int64_t RowsOf(RowSpace r, const RunState& s);

inline float* Floats(const BoundValue& v) { return reinterpret_cast<float*>(v.data); }

// Where an output lands, and its row stride in elements: the arena, or
// the caller's logits for the graph output.
inline float* OutputFloats(const BoundValue& v, const RunState& s) { return v.is_output ? s.logits : Floats(v); }
inline int64_t OutputStride(const BoundValue& v, const RunState& s) {
  return v.is_output ? s.logits_stride : v.row_stride;
}

// A vector weight's floats, or null when it is absent.
const float* VectorWeight(const Weight* w);

// Norm weights and biases must be fp32 vectors of n elements (the compiler
// converts 16-bit vectors at load); an absent one passes.
Status CheckVector(const Weight* w, int64_t n, const std::string& node);

// Layer `layer` of the pass's KV cache, as the cache kernels take it.
KvCacheView KvView(const RunState& s, int64_t layer);

}  // namespace kiln::cpu
