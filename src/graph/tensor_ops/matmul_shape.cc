// Batched matrix product shapes.
#include "graph/tensor_ops/matmul_shape.h"

#include <algorithm>
#include <utility>

#include "graph/tensor_type.h"

namespace kiln {

Expected<MatMulShape> MatMulShapeOf(std::string_view op, std::string_view node,
                                    const std::vector<int64_t>& a_in, const std::vector<int64_t>& b_in) {
  if (a_in.empty() || b_in.empty()) {
    return InvalidArgument("{} {}: operands must have rank 1 or more, got [{}] and [{}]", op, node,
                           DimsToString(a_in), DimsToString(b_in));
  }
  std::vector<int64_t> a = a_in, b = b_in;
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  MatMulShape s;
  s.m = a[a.size() - 2];
  s.k = a[a.size() - 1];
  s.n = b[b.size() - 1];
  if (b[b.size() - 2] != s.k) {
    return InvalidArgument("{} {}: inner dimensions do not match: A [{}] has {} columns, B [{}] has {} rows",
                           op, node, DimsToString(a_in), s.k, DimsToString(b_in), b[b.size() - 2]);
  }
  const std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  std::vector<int64_t> batch(rank), a_dim(rank), b_dim(rank);
  for (size_t i = 0; i < rank; ++i) {
    a_dim[i] = i < rank - a_batch.size() ? 1 : a_batch[i - (rank - a_batch.size())];
    b_dim[i] = i < rank - b_batch.size() ? 1 : b_batch[i - (rank - b_batch.size())];
    if (a_dim[i] != b_dim[i] && a_dim[i] != 1 && b_dim[i] != 1) {
      return InvalidArgument("{} {}: batch dimensions of [{}] and [{}] do not broadcast", op, node,
                             DimsToString(a_in), DimsToString(b_in));
    }
    batch[i] = a_dim[i] == 1 ? b_dim[i] : a_dim[i];
  }
  s.batch = 1;
  for (int64_t d : batch) s.batch *= d;
  s.a_matrices = 1;
  for (int64_t d : a_batch) s.a_matrices *= d;
  s.b_matrices = 1;
  for (int64_t d : b_batch) s.b_matrices *= d;
  s.a_index.assign(static_cast<size_t>(s.batch), 0);
  s.b_index.assign(static_cast<size_t>(s.batch), 0);
  // Odometer over the output batch index, tracking A's and B's flat index.
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < s.batch; ++i) {
    int64_t ai = 0, bi = 0;
    for (size_t d = 0; d < rank; ++d) {
      ai = ai * a_dim[d] + (a_dim[d] == 1 ? 0 : idx[d]);
      bi = bi * b_dim[d] + (b_dim[d] == 1 ? 0 : idx[d]);
    }
    s.a_index[static_cast<size_t>(i)] = ai;
    s.b_index[static_cast<size_t>(i)] = bi;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  s.out_dims = batch;
  if (!a_vector) s.out_dims.push_back(s.m);
  if (!b_vector) s.out_dims.push_back(s.n);
  return s;
}

Expected<std::vector<int64_t>> MatMulBDims(std::string_view op, const AttributeMap& attrs,
                                           std::vector<int64_t> b) {
  if (op != "kiln.FusedMatMul") return b;
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, CheckedIntAttrOr(attrs, "trans_b", 0));
  if (trans_b != 0 && trans_b != 1) return InvalidArgument("{}: trans_b must be 0 or 1, got {}", op, trans_b);
  if (trans_b == 1) {
    if (b.size() < 2)
      return InvalidArgument("{}: trans_b needs B of rank 2 or more, got [{}]", op, DimsToString(b));
    std::swap(b[b.size() - 1], b[b.size() - 2]);
  }
  return b;
}

Expected<int64_t> CheckedIntAttrOr(const AttributeMap& attrs, const std::string& name, int64_t fallback) {
  if (!attrs.Has(name)) return fallback;
  return attrs.Int(name);
}

Expected<double> CheckedFloatAttrOr(const AttributeMap& attrs, const std::string& name, double fallback) {
  if (!attrs.Has(name)) return fallback;
  return attrs.Float(name);
}

}  // namespace kiln
