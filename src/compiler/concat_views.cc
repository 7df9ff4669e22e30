// Channel Concats whose inputs are written in place (see concat_views.h).
#include "compiler/concat_views.h"

#include <map>
#include <optional>

namespace kiln {
namespace {

constexpr int64_t kChannelBlock = 16;  // nchw16c
constexpr int64_t kAlignBytes = 64;    // what kernels may expect of a buffer's start

// A value in the arena: one a view may share.
bool InArena(const Value& v) {
  return v.is_tensor() && !v.is_preset() && !v.is_output && v.io_slot < 0;
}

// Where each input of `n` starts in its output's buffer, in bytes, when the
// inputs are consecutive runs of it.
std::optional<std::vector<int64_t>> PartOffsets(const Graph& g, const Node& n, int64_t elem) {
  const Value& y = g.value(n.outputs[0]);
  const std::vector<int64_t>& d = y.dims;
  const auto rank = static_cast<int64_t>(d.size());
  auto axis_attr = n.named_attrs.Int("axis");
  if (!axis_attr.ok() || rank == 0) return std::nullopt;
  int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const auto a = static_cast<size_t>(axis);
  // Bytes of one step along the axis.
  int64_t step = elem;
  if (y.layout == TensorLayout::kRowMajor) {
    for (size_t i = 0; i < a; ++i) {
      if (d[i] != 1) return std::nullopt;
    }
    for (size_t i = a + 1; i < d.size(); ++i) step *= d[i];
  } else if (y.layout == TensorLayout::kNCHW16c && rank == 4 && axis == 1 && d[0] == 1) {
    step *= d[2] * d[3];
  } else {
    return std::nullopt;
  }
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& x = g.value(n.inputs[i]);
    if (x.dims.size() != d.size() || x.dtype != y.dtype || x.layout != y.layout || x.cols == 0)
      return std::nullopt;
    if (y.layout == TensorLayout::kNCHW16c && i + 1 < n.inputs.size() && x.dims[1] % kChannelBlock != 0)
      return std::nullopt;
    if ((at * step) % kAlignBytes != 0) return std::nullopt;
    offsets.push_back(at * step);
    at += x.dims[a];
  }
  if (at != d[a]) return std::nullopt;
  return offsets;
}

// Where each storage the inputs of `n` live in goes in its output's buffer
// (bytes), when that is safe (see concat_views.h).
std::optional<std::map<ValueId, int64_t>> StoragePlaces(const Graph& g, const Node& n) {
  const ValueId y = n.outputs[0];
  const Value& yv = g.value(y);
  if (!InArena(yv) || yv.view_of != kNoValue) return std::nullopt;
  const int64_t elem = static_cast<int64_t>(DTypeBytes(yv.dtype, 1).value_or(0));
  if (elem == 0) return std::nullopt;
  auto offsets = PartOffsets(g, n, elem);
  if (!offsets) return std::nullopt;
  struct Place {
    int64_t base = 0;
    int64_t covered = 0;
  };
  std::map<ValueId, Place> places;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& x = g.value(n.inputs[i]);
    const ValueId s = g.StorageOf(n.inputs[i]);
    const Value& sv = g.value(s);
    if (s == y || !InArena(x) || !InArena(sv) || sv.domain != yv.domain || sv.dtype != yv.dtype ||
        sv.layout != yv.layout)
      return std::nullopt;
    const int64_t base = (*offsets)[i] - x.col_offset * elem;
    auto [it, first] = places.emplace(s, Place{base, 0});
    if (!first && it->second.base != base) return std::nullopt;  // parts out of order, or twice
    it->second.covered += x.RowBytes();
  }
  std::map<ValueId, int64_t> bases;
  for (const auto& [s, place] : places) {
    if (place.base < 0 || place.base % kAlignBytes != 0 || place.covered != g.value(s).RowBytes())
      return std::nullopt;
    bases.emplace(s, place.base);
  }
  return bases;
}

}  // namespace

Expected<int> MakeConcatViews(Graph& g, const std::string& cpu_backend) {
  int made = 0;
  for (Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::kTensorOp || n.op_type != "Concat" || n.backend != cpu_backend ||
        n.outputs.size() != 1 || n.inputs.empty())
      continue;
    bool has_inputs = true;
    for (ValueId in : n.inputs) has_inputs = has_inputs && in != kNoValue;
    if (!has_inputs) continue;
    auto places = StoragePlaces(g, n);
    if (!places) continue;
    const ValueId y = n.outputs[0];
    const int64_t elem = static_cast<int64_t>(DTypeBytes(g.value(y).dtype, 1).value_or(1));
    for (const auto& [s, base] : *places) {
      // The storage and its views move into y (a view's col_offset counts
      // from the start of its storage).
      const int64_t shift = base / elem;
      for (size_t v = 0; v < g.values().size(); ++v) {
        const auto id = static_cast<ValueId>(v);
        if (id != s && g.StorageOf(id) == s) {
          g.value(id).view_of = y;
          g.value(id).col_offset += shift;
        }
      }
      Value& sv = g.value(s);
      sv.view_of = y;
      sv.col_offset = shift;
    }
    n.dead = true;
    ++made;
  }
  KILN_RETURN_IF_ERROR(g.Compact());
  return made;
}

}  // namespace kiln
