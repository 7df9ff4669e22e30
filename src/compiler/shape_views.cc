// Shape-only nodes and contiguous windows as views of their input (see
// shape_views.h).
#include "compiler/shape_views.h"

#include <optional>

#include "graph/tensor_ops/shape_op_params.h"

namespace kiln {
namespace {

constexpr int64_t kChannelBlock = 16;  // nchw16c
constexpr int64_t kAlignBytes = 64;    // what kernels may expect of a buffer's start

bool RenamesDims(const Node& n) {
  return n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
         n.op_type == "Unsqueeze";
}

// A value in the arena: one a view may share.
bool InArena(const Value& v) {
  return v.is_tensor() && !v.is_preset() && !v.is_output && v.io_slot < 0;
}

// The parameters of a node whose small inputs are constants.
shape_ops::OpParamSource ParamsOf(const Graph& g, const Node& n, std::vector<TensorType>* types) {
  shape_ops::OpParamSource src;
  src.op_type = n.op_type;
  src.node = n.name;
  src.attrs = &n.named_attrs;
  types->clear();
  for (ValueId in : n.inputs) types->push_back(in == kNoValue ? TensorType{} : g.value(in).tensor_type());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId in = n.inputs[i];
    src.types.push_back(in == kNoValue ? nullptr : &(*types)[i]);
    src.values.push_back(in != kNoValue && g.value(in).constant ? g.value(in).constant->data() : nullptr);
  }
  return src;
}

// Where the window x[start : start + count] (step 1) begins in x's buffer,
// in elements, when it is a contiguous run there that is itself a tensor of
// x's layout, starting 64-byte aligned: row-major, every axis before the
// window's one of extent 1 and every axis after it whole; nchw16c, a run of
// whole channel blocks of one image (the last one's padding zero: the
// window ends where x's channels do, or on a block boundary).
std::optional<int64_t> WindowOffset(const Value& x, const std::vector<int64_t>& start,
                                    const std::vector<int64_t>& count) {
  const std::vector<int64_t>& d = x.dims;
  if (start.size() != d.size() || count.size() != d.size()) return std::nullopt;
  size_t axis = d.size();
  for (size_t a = 0; a < d.size(); ++a) {
    if (start[a] != 0 || count[a] != d[a]) {
      if (axis != d.size()) return std::nullopt;  // a second sliced axis
      axis = a;
    }
  }
  if (axis == d.size()) return 0;  // the whole of x
  const int64_t elem = static_cast<int64_t>(DTypeBytes(x.dtype, 1).value_or(0));
  if (elem == 0) return std::nullopt;
  int64_t offset = 0;
  if (x.layout == TensorLayout::kRowMajor) {
    for (size_t a = 0; a < axis; ++a) {
      if (d[a] != 1) return std::nullopt;
    }
    offset = start[axis];
    for (size_t a = axis + 1; a < d.size(); ++a) offset *= d[a];
  } else if (x.layout == TensorLayout::kNCHW16c && d.size() == 4 && axis == 1 && d[0] == 1) {
    if (start[1] % kChannelBlock != 0) return std::nullopt;
    if (count[1] % kChannelBlock != 0 && start[1] + count[1] != d[1]) return std::nullopt;
    offset = start[1] * d[2] * d[3];
  } else {
    return std::nullopt;
  }
  if ((offset * elem) % kAlignBytes != 0) return std::nullopt;
  return offset;
}

// The windows a Slice or Split node's outputs are of its input (start and
// count per axis, one pair per output); none when they are not known now
// or take steps.
std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> Windows(const Graph& g, const Node& n) {
  std::vector<TensorType> types;
  const shape_ops::OpParamSource src = ParamsOf(g, n, &types);
  const std::vector<int64_t>& d = g.value(n.inputs[0]).dims;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> windows;
  if (n.op_type == "Slice") {
    auto p = shape_ops::ResolveSlice(src);
    if (!p.ok()) return {};
    for (size_t a = 0; a < p->step.size(); ++a) {
      if (p->step[a] != 1 && p->count[a] > 1) return {};
    }
    windows.emplace_back(p->start, p->count);
  } else if (n.op_type == "Split") {
    auto p = shape_ops::ResolveSplit(src, static_cast<int>(n.outputs.size()));
    if (!p.ok() || p->sizes.size() != n.outputs.size()) return {};
    int64_t at = 0;
    for (int64_t size : p->sizes) {
      std::vector<int64_t> start(d.size(), 0), count = d;
      start[static_cast<size_t>(p->axis)] = at;
      count[static_cast<size_t>(p->axis)] = size;
      at += size;
      windows.emplace_back(std::move(start), std::move(count));
    }
  }
  return windows;
}

}  // namespace

Expected<int> MakeViews(Graph& g, const std::string& cpu_backend) {
  int made = 0;
  for (Node& n : g.nodes()) {
    if (n.dead || n.op != OpKind::kTensorOp || n.backend != cpu_backend || n.inputs.empty() ||
        n.inputs[0] == kNoValue)
      continue;
    const bool renames = RenamesDims(n) && n.outputs.size() == 1;
    if (!renames && n.op_type != "Slice" && n.op_type != "Split") continue;
    const ValueId x = n.inputs[0];
    const ValueId storage = g.StorageOf(x);
    const Value& xv = g.value(x);
    const Value& sv = g.value(storage);
    if (!InArena(xv) || !InArena(sv)) continue;
    // Each output's offset in x's buffer.
    std::vector<int64_t> offsets;
    if (renames) {
      if (xv.layout != TensorLayout::kRowMajor) continue;
      offsets.push_back(0);
    } else {
      for (const auto& [start, count] : Windows(g, n)) {
        auto offset = WindowOffset(xv, start, count);
        if (!offset) break;
        offsets.push_back(*offset);
      }
      if (offsets.size() != n.outputs.size()) continue;
    }
    bool shareable = true;
    for (ValueId y : n.outputs) {
      const Value& yv = g.value(y);
      shareable = shareable && InArena(yv) && yv.view_of == kNoValue && yv.dtype == xv.dtype &&
                  yv.layout == xv.layout && yv.domain == sv.domain;
    }
    if (!shareable) continue;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      Value& yv = g.value(n.outputs[o]);
      yv.view_of = storage;
      yv.col_offset = xv.col_offset + offsets[o];
    }
    n.dead = true;
    ++made;
  }
  KILN_RETURN_IF_ERROR(g.Compact());
  return made;
}

}  // namespace kiln
