// The shapes of numpy-style batched matrix products (ONNX MatMul,
// MatMulInteger, QLinearMatMul): which A and B matrices each output matrix
// multiplies, shared by shape inference and the kernels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"

namespace kiln {

struct MatMulShape {
  std::vector<int64_t> out_dims;  // as ONNX gives them (1-d operands' axes dropped)
  int64_t batch = 1;              // output matrices
  int64_t m = 1, n = 1, k = 1;
  // Per output matrix: the index of the A matrix ([.., m, k] blocks) and of
  // the B matrix ([.., k, n] blocks) it multiplies, after broadcasting.
  std::vector<int64_t> a_index, b_index;
  int64_t a_matrices = 1, b_matrices = 1;  // matrices A and B hold
};

// A 1-d A is a row [1, k] and a 1-d B a column [k, 1], whose axes the
// output drops; batch dims broadcast. Errors name the op and node.
Expected<MatMulShape> MatMulShapeOf(std::string_view op, std::string_view node, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b);

// B's dims as MatMul sees them: for kiln.FusedMatMul with trans_b = 1 (B
// given as [..., N, K]) the last two swapped; as given otherwise.
Expected<std::vector<int64_t>> MatMulBDims(std::string_view op, const AttributeMap& attrs,
                                           std::vector<int64_t> b);

// Attribute `name`, or `fallback` when the node does not set it; an error
// when it is set with another type (conv_geometry.h's IntAttrOr and
// FloatAttrOr fall back instead).
Expected<int64_t> CheckedIntAttrOr(const AttributeMap& attrs, const std::string& name, int64_t fallback);
Expected<double> CheckedFloatAttrOr(const AttributeMap& attrs, const std::string& name, double fallback);

}  // namespace kiln
