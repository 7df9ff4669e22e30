// Shape inference of the ops that select, join or scatter parts of
// tensors: Concat, Split, Slice, Gather, GatherElements, GatherND,
// ScatterElements, ScatterND, Pad, NonZero.
#include <algorithm>
#include <limits>

#include "graph/tensor_ops/shape_helpers.h"
#include "graph/tensor_ops/shape_op_groups.h"
#include "graph/tensor_ops/shape_op_params.h"

namespace kiln::shape_ops {
namespace {

bool IsIndexType(DType t) {
  return t == DType::kI64 || t == DType::kI32;
}

Status CheckIndexType(const OpParamSource& src, size_t i) {
  if (!IsIndexType(src.type(i).dtype)) {
    return src.Error(fmt::format("indices must be int64 or int32, got {}", DTypeName(src.type(i).dtype)));
  }
  return Status::Ok();
}

Expected<ShapeResult> InferConcat(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  if (!ctx.attrs->Has("axis")) return src.Error("needs the axis attribute");
  const TensorType& first = src.type(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(src.IntAttr("axis", 0), first.rank()));
  std::vector<int64_t> dims = first.dims;
  dims[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < src.types.size(); ++i) {
    if (!src.has(i)) return src.Error(fmt::format("input {} is missing", i));
    const TensorType& t = src.type(i);
    bool same = t.dtype == first.dtype && t.rank() == first.rank();
    for (size_t a = 0; same && a < dims.size(); ++a)
      same = a == static_cast<size_t>(axis) || t.dims[a] == first.dims[a];
    if (!same) {
      return src.Error(fmt::format("input {} is {} but input 0 is {}; they may differ only along axis {}", i,
                                   t.ToString(), first.ToString(), axis));
    }
    dims[static_cast<size_t>(axis)] += t.dims[static_cast<size_t>(axis)];
  }
  return OneOutput(TensorType{first.dtype, dims});
}

Expected<ShapeResult> InferSplit(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(SplitParams p, ResolveSplit(src, ctx.num_outputs));
  ShapeResult r;
  for (int64_t s : p.sizes) {
    TensorType t = src.type(0);
    t.dims[static_cast<size_t>(p.axis)] = s;
    r.outputs.push_back(t);
  }
  return r;
}

Expected<ShapeResult> InferSlice(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  if (src.has(1) && !src.has(2)) return src.Error("has starts but no ends");
  KILN_ASSIGN_OR_RETURN(SliceParams p, ResolveSlice(src));
  return OneOutput(TensorType{src.type(0).dtype, p.count});
}

// Constant indices are checked now; run-time ones by the kernel.
Status CheckConstantIndices(const OpParamSource& src, size_t i, int64_t limit, const char* what) {
  if (i >= src.values.size() || src.values[i] == nullptr) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, src.Ints(i, "indices"));
  for (int64_t v : idx) {
    if (v < -limit || v >= limit) {
      return src.Error(fmt::format("index {} is out of range for {} of size {}", v, what, limit));
    }
  }
  return Status::Ok();
}

Expected<ShapeResult> InferGather(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_RETURN_IF_ERROR(CheckIndexType(src, 1));
  const TensorType& data = src.type(0);
  if (data.rank() == 0) return src.Error("cannot gather from a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(src.IntAttr("axis", 0), data.rank()));
  KILN_RETURN_IF_ERROR(
      CheckConstantIndices(src, 1, data.dims[static_cast<size_t>(axis)], "the gathered axis"));
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), src.type(1).dims.begin(), src.type(1).dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  return OneOutput(TensorType{data.dtype, dims});
}

// GatherElements and ScatterElements: indices of data's rank, no larger
// than data off the axis.
Expected<int64_t> ElementsAxis(const OpParamSource& src, size_t indices) {
  KILN_RETURN_IF_ERROR(CheckIndexType(src, indices));
  const TensorType& data = src.type(0);
  const TensorType& idx = src.type(indices);
  if (data.rank() == 0) return src.Error("data must have rank 1 or more");
  KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(src.IntAttr("axis", 0), data.rank()));
  if (idx.rank() != data.rank()) {
    return src.Error(fmt::format("indices {} and data {} differ in rank", idx.ToString(), data.ToString()));
  }
  for (size_t a = 0; a < data.dims.size(); ++a) {
    if (a != static_cast<size_t>(axis) && idx.dims[a] > data.dims[a]) {
      return src.Error(
          fmt::format("indices {} are larger than data {} on axis {}", idx.ToString(), data.ToString(), a));
    }
  }
  KILN_RETURN_IF_ERROR(CheckConstantIndices(src, indices, data.dims[static_cast<size_t>(axis)], "the axis"));
  return axis;
}

Expected<ShapeResult> InferGatherElements(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_RETURN_IF_ERROR(ElementsAxis(src, 1).status());
  return OneOutput(TensorType{src.type(0).dtype, src.type(1).dims});
}

Expected<ShapeResult> InferScatterElements(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_RETURN_IF_ERROR(ElementsAxis(src, 1).status());
  if (src.type(2).dims != src.type(1).dims || src.type(2).dtype != src.type(0).dtype) {
    return src.Error(fmt::format("updates {} must have the indices' shape [{}] and the data's dtype {}",
                                 src.type(2).ToString(), DimsToString(src.type(1).dims),
                                 DTypeName(src.type(0).dtype)));
  }
  return OneOutput(src.type(0));
}

// GatherND's and ScatterND's index depth, checked.
Expected<int64_t> IndexDepth(const OpParamSource& src, int64_t batch_dims) {
  KILN_RETURN_IF_ERROR(CheckIndexType(src, 1));
  const TensorType& data = src.type(0);
  const TensorType& idx = src.type(1);
  if (idx.rank() < 1) return src.Error("indices must have rank 1 or more");
  const int64_t k = idx.dims.back();
  if (batch_dims != 0 && (batch_dims < 0 || batch_dims >= std::min<int64_t>(data.rank(), idx.rank()))) {
    return src.Error(fmt::format("batch_dims {} must be below the ranks of data and indices", batch_dims));
  }
  for (int64_t b = 0; b < batch_dims; ++b) {
    if (data.dims[static_cast<size_t>(b)] != idx.dims[static_cast<size_t>(b)]) {
      return src.Error(
          fmt::format("batch dims of data {} and indices {} differ", data.ToString(), idx.ToString()));
    }
  }
  if (k < 1 || k > data.rank() - batch_dims) {
    return src.Error(fmt::format("indices' last dim {} must be in [1, {}]", k, data.rank() - batch_dims));
  }
  return k;
}

Expected<ShapeResult> InferGatherND(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  const int64_t b = src.IntAttr("batch_dims", 0);
  KILN_ASSIGN_OR_RETURN(int64_t k, IndexDepth(src, b));
  const TensorType& data = src.type(0);
  const TensorType& idx = src.type(1);
  std::vector<int64_t> dims(idx.dims.begin(), idx.dims.end() - 1);
  dims.insert(dims.end(), data.dims.begin() + b + k, data.dims.end());
  return OneOutput(TensorType{data.dtype, dims});
}

Expected<ShapeResult> InferScatterND(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(int64_t k, IndexDepth(src, 0));
  const TensorType& data = src.type(0);
  const TensorType& idx = src.type(1);
  std::vector<int64_t> want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + k, data.dims.end());
  if (src.type(2).dims != want || src.type(2).dtype != data.dtype) {
    return src.Error(fmt::format("updates {} must be {}[{}]", src.type(2).ToString(), DTypeName(data.dtype),
                                 DimsToString(want)));
  }
  return OneOutput(data);
}

Expected<ShapeResult> InferPad(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  KILN_ASSIGN_OR_RETURN(PadParams p, ResolvePad(src));
  std::vector<int64_t> dims = src.type(0).dims;
  for (size_t a = 0; a < dims.size(); ++a) dims[a] += p.begin[a] + p.end[a];
  if (src.has(2) && src.type(2).dtype != src.type(0).dtype) {
    return src.Error(fmt::format("constant_value is {} but the data is {}", DTypeName(src.type(2).dtype),
                                 DTypeName(src.type(0).dtype)));
  }
  return OneOutput(TensorType{src.type(0).dtype, dims});
}

// The coordinates of x's nonzero elements, [rank, count]: its shape
// depends on the values, so only a compile-time input has one.
Expected<ShapeResult> InferNonZero(const ShapeContext& ctx) {
  OpParamSource src = ParamSourceFromContext(ctx);
  if (src.values.empty() || src.values[0] == nullptr) {
    return Unsupported(
        "{} {}: its output shape depends on the input's values, which are computed at run time; kiln "
        "compiles static shapes (NonZero runs only on compile-time inputs)",
        ctx.op_type, ctx.node);
  }
  std::vector<double> v;
  if (!ReadDoubles(src.type(0).dtype, src.values[0], src.type(0).ElementCount(), &v)) {
    return src.Error(fmt::format("dtype {} is not supported", DTypeName(src.type(0).dtype)));
  }
  const int64_t rank = src.rank0();
  const std::vector<int64_t>& dims = src.type(0).dims;
  std::vector<std::vector<int64_t>> coords(static_cast<size_t>(std::max<int64_t>(rank, 1)));
  int64_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    ++count;
    auto rest = static_cast<int64_t>(i);
    for (int64_t a = rank - 1; a >= 0; --a) {
      coords[static_cast<size_t>(a)].push_back(rest % dims[static_cast<size_t>(a)]);
      rest /= dims[static_cast<size_t>(a)];
    }
  }
  // A scalar has rank 0 but ONNX gives it one row of zeros.
  const int64_t rows = std::max<int64_t>(rank, 1);
  if (rank == 0) coords[0].assign(static_cast<size_t>(count), 0);
  std::vector<int64_t> flat;
  for (const auto& c : coords) flat.insert(flat.end(), c.begin(), c.end());
  ShapeResult r = OneOutput(TensorType{DType::kI64, {rows, count}});
  r.constants.push_back(TensorData::FromValues<int64_t>(DType::kI64, {rows, count}, flat));
  return r;
}

}  // namespace

void AddShapeSelectOpDefs(std::vector<TensorOpDef>* ops) {
  constexpr int kMany = std::numeric_limits<int>::max();
  ops->push_back(ShapeOpDef("Concat", 1, kMany, InferConcat));
  ops->push_back(ShapeOpDef("Split", 1, 2, InferSplit, 1, kMany));
  ops->push_back(ShapeOpDef("Slice", 1, 5, InferSlice));
  ops->push_back(ShapeOpDef("Gather", 2, 2, InferGather));
  ops->push_back(ShapeOpDef("GatherElements", 2, 2, InferGatherElements));
  ops->push_back(ShapeOpDef("GatherND", 2, 2, InferGatherND));
  ops->push_back(ShapeOpDef("ScatterElements", 3, 3, InferScatterElements));
  ops->push_back(ShapeOpDef("Scatter", 3, 3, InferScatterElements));  // opsets 9-10's name for it
  ops->push_back(ShapeOpDef("ScatterND", 3, 3, InferScatterND));
  ops->push_back(ShapeOpDef("Pad", 1, 4, InferPad));
  ops->push_back(ShapeOpDef("NonZero", 1, 1, InferNonZero));
}

}  // namespace kiln::shape_ops
