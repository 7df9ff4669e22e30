// The CPU kernels that select, join or scatter parts of tensors: Concat,
// Split, Slice, Gather, GatherElements, GatherND, ScatterElements,
// ScatterND, Pad, NonZero. Index values arriving at run time are checked
// before anything is read with them; a bad one is an error naming the node
// and the value.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "backend/cpu/tensor_kernels/blocked_channel_gather.h"
#include "backend/cpu/tensor_kernels/blocked_layout.h"
#include "backend/cpu/tensor_kernels/shape_kernel_groups.h"
#include "backend/cpu/tensor_kernels/shape_kernel_params.h"
#include "backend/cpu/tensor_kernels/tensor_scalar.h"
#include "core/thread_pool.h"

namespace kiln::cpu::shape_kernels {

using namespace ::kiln::shape_ops;  // the parameters these kernels share with shape inference
namespace {

int64_t Product(const std::vector<int64_t>& d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < d.size(); ++i) p *= d[i];
  return p;
}

template <typename Body>
void ForRange(ThreadPool* pool, int64_t n, int64_t bytes, Body&& body) {
  if (pool == nullptr || pool->num_threads() <= 1 || bytes < kParallelCopyBytes || n < 2) {
    body(0, n);
    return;
  }
  const int64_t per_item = std::max<int64_t>(1, bytes / n);
  pool->ParallelFor(n, std::max<int64_t>(1, (kParallelCopyBytes / 4) / per_item),
                    [&](int64_t b, int64_t e, int) { body(b, e); });
}

// Concat and Split: rows of `outer` blocks, one block per part.
struct PartLayout {
  int64_t outer = 1;
  std::vector<int64_t> part_bytes;  // one row's block of each part
  int64_t row_bytes = 0;
};

PartLayout LayoutParts(const std::vector<TensorType>& parts, int64_t axis, size_t elem) {
  PartLayout l;
  l.outer = Product(parts[0].dims, 0, static_cast<size_t>(axis));
  for (const TensorType& t : parts) {
    const int64_t b = Product(t.dims, static_cast<size_t>(axis), t.dims.size()) * static_cast<int64_t>(elem);
    l.part_bytes.push_back(b);
    l.row_bytes += b;
  }
  return l;
}

// Concat and Split on nchw16c activations: each part a run of whole blocks
// (N, C/16, H, W, 16) along the axis, so the copies are those of row-major
// parts with the blocked dims, where along the channels every part but the
// last fills its blocks (a multiple of 16 channels; the last one's padding
// is the whole tensor's). Parts that do not (ShuffleNet's halves of 24
// channels) move by lane permutes (blocked_channel_gather.h).
bool BlockedPartsJoin(const std::vector<TensorType>& parts, const TensorType& whole,
                      const AttributeMap& attrs) {
  if (whole.rank() != 4 || whole.dtype != DType::kF32) return false;
  int64_t axis = attrs.Int("axis").ok() ? *attrs.Int("axis") : 0;
  if (axis < 0) axis += 4;
  if (axis < 0 || axis > 3) return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].rank() != 4 || parts[i].dtype != DType::kF32) return false;
  }
  return true;
}

// Joined along the channels with a part before the last that does not fill
// its blocks: the lane permutes move them.
bool PartsNeedLanePermutes(const std::vector<TensorType>& parts, int64_t axis) {
  if (axis != 1) return false;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].dims[1] % kChannelBlock != 0) return true;
  }
  return false;
}

// Runs one lane-permute plan per output.
TensorKernel LanePermuteKernel(std::vector<BlockedGatherPlan> plans) {
  auto shared = std::make_shared<const std::vector<BlockedGatherPlan>>(std::move(plans));
  const Isa isa = BestIsa();
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(isa == Isa::kAvx512 ? isa : Isa::kScalar) + "-lanes-nchw16c";
  k.run = [shared, isa](const TensorCall& call) {
    for (size_t o = 0; o < shared->size(); ++o) {
      RunBlockedGather((*shared)[o], reinterpret_cast<const float* const*>(call.inputs),
                       static_cast<float*>(call.outputs[o]), call.pool, isa);
    }
    return Status::Ok();
  };
  return k;
}

// Concat along the channels by lane permutes: output channel c from its part.
TensorKernel BlockedChannelConcat(const std::vector<TensorType>& parts, const TensorType& whole) {
  std::vector<ChannelSource> sources;
  std::vector<int64_t> channels;
  for (size_t i = 0; i < parts.size(); ++i) {
    channels.push_back(parts[i].dims[1]);
    for (int64_t c = 0; c < parts[i].dims[1]; ++c) sources.push_back({static_cast<int32_t>(i), c});
  }
  const std::vector<int64_t>& d = whole.dims;
  return LanePermuteKernel({PlanBlockedGather(sources, channels, d[0], d[2] * d[3])});
}

// Split along the channels by lane permutes: each output a window of the input.
TensorKernel BlockedChannelSplit(const TensorType& whole, const std::vector<TensorType>& parts) {
  const std::vector<int64_t>& d = whole.dims;
  std::vector<BlockedGatherPlan> plans;
  int64_t offset = 0;
  for (const TensorType& part : parts) {
    std::vector<ChannelSource> sources;
    for (int64_t c = 0; c < part.dims[1]; ++c) sources.push_back({0, offset + c});
    offset += part.dims[1];
    plans.push_back(PlanBlockedGather(sources, {d[1]}, d[0], d[2] * d[3]));
  }
  return LanePermuteKernel(std::move(plans));
}

bool ConcatTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  if (layout != TensorLayout::kNCHW16c || args.outputs.size() != 1) return false;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (!BlockedInput(args, i)) return false;  // a constant part would be row-major
  }
  return BlockedPartsJoin(args.inputs, args.outputs[0], args.a());
}

bool SplitTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  return layout == TensorLayout::kNCHW16c && BlockedInput(args, 0) &&
         BlockedPartsJoin(args.outputs, args.inputs[0], args.a());
}

// The parts' types as the copies see them: blocked dims on nchw16c.
Expected<std::vector<TensorType>> PartsAsStored(const TensorKernelArgs& args,
                                                const std::vector<TensorType>& parts,
                                                TensorLayoutSupport takes) {
  if (!NodeIsNchw16c(args)) return parts;
  if (!takes(TensorLayout::kNCHW16c, args)) {
    return Unsupported("{} {}: nchw16c activations need f32 rank-4 parts computed at run time", args.op_type,
                       args.node);
  }
  std::vector<TensorType> stored = parts;
  for (TensorType& t : stored) t.dims = BlockedDims(t.dims);
  return stored;
}

Expected<TensorKernel> MakeConcat(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KernelParams params(args);
  KILN_ASSIGN_OR_RETURN(
      int64_t axis,
      params.AtBind().Axis(args.a().Int("axis").ok() ? *args.a().Int("axis") : 0, args.inputs[0].rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> parts, PartsAsStored(args, args.inputs, ConcatTakesLayout));
  if (NodeIsNchw16c(args) && PartsNeedLanePermutes(args.inputs, axis))
    return BlockedChannelConcat(args.inputs, args.outputs[0]);
  auto l = std::make_shared<PartLayout>(LayoutParts(parts, axis, elem));
  TensorKernel k;
  k.impl = NodeIsNchw16c(args) ? "memcpy-runs-nchw16c" : "memcpy-runs";
  k.run = [l](const TensorCall& call) {
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    const size_t parts = l->part_bytes.size();
    if (l->outer == 1) {
      int64_t off = 0;
      for (size_t i = 0; i < parts; ++i) {
        ParallelMemcpy(out + off, call.inputs[i], static_cast<size_t>(l->part_bytes[i]), call.pool);
        off += l->part_bytes[i];
      }
      return Status::Ok();
    }
    ForRange(call.pool, l->outer, l->outer * l->row_bytes, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        uint8_t* row = out + o * l->row_bytes;
        for (size_t i = 0; i < parts; ++i) {
          const int64_t pb = l->part_bytes[i];
          std::memcpy(row, static_cast<const uint8_t*>(call.inputs[i]) + o * pb, static_cast<size_t>(pb));
          row += pb;
        }
      }
    });
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeSplit(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KernelParams params(args);
  KILN_ASSIGN_OR_RETURN(
      int64_t axis,
      params.AtBind().Axis(args.a().Int("axis").ok() ? *args.a().Int("axis") : 0, args.inputs[0].rank()));
  KILN_ASSIGN_OR_RETURN(std::vector<TensorType> parts, PartsAsStored(args, args.outputs, SplitTakesLayout));
  if (NodeIsNchw16c(args) && PartsNeedLanePermutes(args.outputs, axis))
    return BlockedChannelSplit(args.inputs[0], args.outputs);
  auto l = std::make_shared<PartLayout>(LayoutParts(parts, axis, elem));
  TensorKernel k;
  k.impl = NodeIsNchw16c(args) ? "memcpy-runs-nchw16c" : "memcpy-runs";
  k.run = [l](const TensorCall& call) {
    const auto* in = static_cast<const uint8_t*>(call.inputs[0]);
    const size_t parts = l->part_bytes.size();
    if (l->outer == 1) {
      int64_t off = 0;
      for (size_t i = 0; i < parts; ++i) {
        ParallelMemcpy(call.outputs[i], in + off, static_cast<size_t>(l->part_bytes[i]), call.pool);
        off += l->part_bytes[i];
      }
      return Status::Ok();
    }
    ForRange(call.pool, l->outer, l->outer * l->row_bytes, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const uint8_t* row = in + o * l->row_bytes;
        for (size_t i = 0; i < parts; ++i) {
          const int64_t pb = l->part_bytes[i];
          std::memcpy(static_cast<uint8_t*>(call.outputs[i]) + o * pb, row, static_cast<size_t>(pb));
          row += pb;
        }
      }
    });
    return Status::Ok();
  };
  return k;
}

// Slice as a strided copy from the first selected element.
struct SlicePlan {
  StridedCopySpec spec;
  int64_t offset = 0;  // elements
};

Expected<SlicePlan> PlanSlice(const OpParamSource& src, const TensorType& out, size_t elem) {
  KILN_ASSIGN_OR_RETURN(SliceParams p, ResolveSlice(src));
  if (p.count != out.dims) {
    return src.Error(fmt::format("the slice [{}] differs from the shape [{}] fixed at compile time",
                                 DimsToString(p.count), DimsToString(out.dims)));
  }
  SlicePlan plan;
  const std::vector<int64_t> in_strides = ContiguousStrides(src.type(0).dims);
  plan.spec.elem_bytes = elem;
  plan.spec.dims = p.count;
  for (size_t a = 0; a < p.count.size(); ++a) {
    plan.spec.src_strides.push_back(in_strides[a] * p.step[a]);
    plan.offset += p.start[a] * in_strides[a];
  }
  plan.spec.dst_strides = ContiguousStrides(p.count);
  return plan;
}

// Slice on nchw16c activations: a window of the channels (step 1, known at
// compile time; the other axes whole) at any offset, 16 lanes per pixel.
std::optional<std::vector<ChannelSource>> BlockedSliceSources(const TensorKernelArgs& args) {
  const TensorType& x = args.inputs[0];
  if (x.rank() != 4 || x.dtype != DType::kF32 || !BlockedInput(args, 0)) return std::nullopt;
  KernelParams params(args);
  if (!params.Known({1, 2, 3, 4})) return std::nullopt;
  auto p = ResolveSlice(params.AtBind());
  if (!p.ok() || p->count.size() != 4) return std::nullopt;
  for (size_t a = 0; a < 4; ++a) {
    if (p->step[a] != 1) return std::nullopt;
    if (a != 1 && (p->start[a] != 0 || p->count[a] != x.dims[a])) return std::nullopt;
  }
  std::vector<ChannelSource> sources;
  for (int64_t c = 0; c < p->count[1]; ++c) sources.push_back({0, p->start[1] + c});
  return sources;
}

bool SliceTakesLayout(TensorLayout layout, const TensorKernelArgs& args) {
  return layout == TensorLayout::kNCHW16c && BlockedSliceSources(args).has_value();
}

Expected<TensorKernel> MakeBlockedSlice(const TensorKernelArgs& args) {
  auto sources = BlockedSliceSources(args);
  if (!sources) {
    return Unsupported(
        "{} {}: nchw16c activations need an f32 rank-4 input computed at run time, sliced along "
        "the channels only, with step 1, known at compile time",
        args.op_type, args.node);
  }
  const std::vector<int64_t>& d = args.inputs[0].dims;
  auto plan =
      std::make_shared<const BlockedGatherPlan>(PlanBlockedGather(*sources, {d[1]}, d[0], d[2] * d[3]));
  const Isa isa = BestIsa();
  TensorKernel k;
  k.impl = std::string("kiln-") + IsaName(isa == Isa::kAvx512 ? isa : Isa::kScalar) + "-nchw16c";
  k.run = [plan, isa](const TensorCall& call) {
    RunBlockedGather(*plan, reinterpret_cast<const float* const*>(call.inputs),
                     static_cast<float*>(call.outputs[0]), call.pool, isa);
    return Status::Ok();
  };
  return k;
}

Expected<TensorKernel> MakeSlice(const TensorKernelArgs& args) {
  if (NodeIsNchw16c(args)) return MakeBlockedSlice(args);
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  auto params = std::make_shared<KernelParams>(args);
  const TensorType out = args.outputs[0];
  std::shared_ptr<const SlicePlan> fixed;
  if (params->Known({1, 2, 3, 4})) {
    KILN_ASSIGN_OR_RETURN(SlicePlan plan, PlanSlice(params->AtBind(), out, elem));
    fixed = std::make_shared<const SlicePlan>(std::move(plan));
  }
  TensorKernel k;
  k.impl = "strided-copy";
  k.run = [params, fixed, out, elem](const TensorCall& call) -> Status {
    std::shared_ptr<const SlicePlan> plan = fixed;
    if (!plan) {
      KILN_ASSIGN_OR_RETURN(SlicePlan p, PlanSlice(params->AtRun(call.inputs), out, elem));
      plan = std::make_shared<const SlicePlan>(std::move(p));
    }
    StridedCopy(plan->spec,
                static_cast<const uint8_t*>(call.inputs[0]) + plan->offset * static_cast<int64_t>(elem),
                static_cast<uint8_t*>(call.outputs[0]), call.pool);
    return Status::Ok();
  };
  return k;
}

// Reads the indices (int32 or int64), made non-negative, each checked
// against `limit`.
Status ReadIndices(const std::string& op, const std::string& node, DType dtype, const void* data, int64_t n,
                   int64_t limit, std::vector<int64_t>* out) {
  if (!ReadInts(dtype, data, n, out))
    return InvalidArgument("{} {}: indices of dtype {}", op, node, DTypeName(dtype));
  for (int64_t& v : *out) {
    if (v < -limit || v >= limit) {
      return OutOfRange("{} {}: index {} is out of range [{}, {})", op, node, v, -limit, limit);
    }
    if (v < 0) v += limit;
  }
  return Status::Ok();
}

Expected<TensorKernel> MakeGather(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KernelParams params(args);
  const TensorType& data = args.inputs[0];
  KILN_ASSIGN_OR_RETURN(
      int64_t axis, params.AtBind().Axis(args.a().Int("axis").ok() ? *args.a().Int("axis") : 0, data.rank()));
  const int64_t outer = Product(data.dims, 0, static_cast<size_t>(axis));
  const int64_t len = data.dims[static_cast<size_t>(axis)];
  const int64_t block =
      Product(data.dims, static_cast<size_t>(axis) + 1, data.dims.size()) * static_cast<int64_t>(elem);
  const int64_t n = args.inputs[1].ElementCount();
  const DType idx_type = args.inputs[1].dtype;
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "memcpy-runs";
  k.run = [=](const TensorCall& call) -> Status {
    std::vector<int64_t> idx;
    KILN_RETURN_IF_ERROR(ReadIndices(op, node, idx_type, call.inputs[1], n, len, &idx));
    const auto* in = static_cast<const uint8_t*>(call.inputs[0]);
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    ForRange(call.pool, outer * n, outer * n * block, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / n, j = r % n;
        std::memcpy(out + r * block, in + (o * len + idx[static_cast<size_t>(j)]) * block,
                    static_cast<size_t>(block));
      }
    });
    return Status::Ok();
  };
  return k;
}

// GatherElements and ScatterElements walk the indices' positions; this
// gives each position's offset in the data with the axis coordinate taken
// from the index.
struct ElementsWalk {
  std::vector<int64_t> idx_dims;
  std::vector<int64_t> data_strides;
  int64_t axis = 0;
  int64_t axis_len = 0;

  template <typename F>
  void ForEach(const std::vector<int64_t>& indices, F&& f) const {
    const size_t r = idx_dims.size();
    std::vector<int64_t> pos(r, 0);
    int64_t base = 0;  // the data offset of pos with the axis coordinate 0
    const auto n = static_cast<int64_t>(indices.size());
    const auto ax = static_cast<size_t>(axis);
    for (int64_t i = 0; i < n; ++i) {
      f(i, base + indices[static_cast<size_t>(i)] * data_strides[ax]);
      for (size_t a = r; a-- > 0;) {
        if (++pos[a] < idx_dims[a]) {
          if (a != ax) base += data_strides[a];
          break;
        }
        if (a != ax) base -= data_strides[a] * (idx_dims[a] - 1);
        pos[a] = 0;
      }
    }
  }
};

Expected<ElementsWalk> MakeElementsWalk(const TensorKernelArgs& args) {
  KernelParams params(args);
  ElementsWalk w;
  KILN_ASSIGN_OR_RETURN(w.axis, params.AtBind().Axis(args.a().Int("axis").ok() ? *args.a().Int("axis") : 0,
                                                     args.inputs[0].rank()));
  w.idx_dims = args.inputs[1].dims;
  w.data_strides = ContiguousStrides(args.inputs[0].dims);
  w.axis_len = args.inputs[0].dims[static_cast<size_t>(w.axis)];
  return w;
}

Expected<TensorKernel> MakeGatherElements(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KILN_ASSIGN_OR_RETURN(ElementsWalk w, MakeElementsWalk(args));
  const int64_t n = args.inputs[1].ElementCount();
  const DType idx_type = args.inputs[1].dtype;
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) -> Status {
    std::vector<int64_t> idx;
    KILN_RETURN_IF_ERROR(ReadIndices(op, node, idx_type, call.inputs[1], n, w.axis_len, &idx));
    const auto* in = static_cast<const uint8_t*>(call.inputs[0]);
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    w.ForEach(idx, [&](int64_t i, int64_t off) { std::memcpy(out + i * elem, in + off * elem, elem); });
    return Status::Ok();
  };
  return k;
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Expected<Reduction> ParseReduction(const TensorKernelArgs& args) {
  const auto s = args.a().String("reduction");
  const std::string r = s.ok() ? *s : "none";
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return InvalidArgument("{} {}: unknown reduction '{}'", args.op_type, args.node, r);
}

template <typename T>
void Combine(Reduction r, uint8_t* dst, const uint8_t* src) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  switch (r) {
    case Reduction::kNone: a = b; break;
    case Reduction::kAdd: a = a + b; break;
    case Reduction::kMul: a = a * b; break;
    case Reduction::kMax: a = std::max(a, b); break;
    case Reduction::kMin: a = std::min(a, b); break;
  }
  std::memcpy(dst, &a, sizeof(T));
}

// Writes one update element into the output with the reduction.
using CombineFn = void (*)(Reduction, uint8_t*, const uint8_t*);

Expected<CombineFn> CombinerFor(const TensorKernelArgs& args, Reduction r) {
  switch (args.inputs[0].dtype) {
    case DType::kF32: return &Combine<float>;
    case DType::kF64: return &Combine<double>;
    case DType::kI64: return &Combine<int64_t>;
    case DType::kI32: return &Combine<int32_t>;
    case DType::kI8: return &Combine<int8_t>;
    case DType::kU8: return &Combine<uint8_t>;
    default:
      if (r == Reduction::kNone) return static_cast<CombineFn>(nullptr);
      return Unsupported("{} {}: reduction on dtype {} is not supported (f32, f64, i64, i32, i8, u8)",
                         args.op_type, args.node, DTypeName(args.inputs[0].dtype));
  }
}

Expected<TensorKernel> MakeScatterElements(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KILN_ASSIGN_OR_RETURN(ElementsWalk w, MakeElementsWalk(args));
  KILN_ASSIGN_OR_RETURN(Reduction red, ParseReduction(args));
  KILN_ASSIGN_OR_RETURN(CombineFn combine, CombinerFor(args, red));
  const int64_t n = args.inputs[1].ElementCount();
  const size_t bytes = args.outputs[0].Bytes();
  const DType idx_type = args.inputs[1].dtype;
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) -> Status {
    std::vector<int64_t> idx;
    KILN_RETURN_IF_ERROR(ReadIndices(op, node, idx_type, call.inputs[1], n, w.axis_len, &idx));
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    const auto* upd = static_cast<const uint8_t*>(call.inputs[2]);
    if (call.outputs[0] != call.inputs[0]) ParallelMemcpy(out, call.inputs[0], bytes, call.pool);
    w.ForEach(idx, [&](int64_t i, int64_t off) {
      if (red == Reduction::kNone || combine == nullptr) {
        std::memcpy(out + off * elem, upd + i * elem, elem);
      } else {
        combine(red, out + off * elem, upd + i * elem);
      }
    });
    return Status::Ok();
  };
  return k;
}

// GatherND/ScatterND: the data offset (in elements) of each index tuple.
Status TupleOffsets(const std::string& op, const std::string& node, const std::vector<int64_t>& data_dims,
                    int64_t batch_dims, DType idx_type, const void* idx_data, int64_t tuples, int64_t k,
                    std::vector<int64_t>* offsets) {
  std::vector<int64_t> idx;
  if (!ReadInts(idx_type, idx_data, tuples * k, &idx))
    return InvalidArgument("{} {}: bad index dtype", op, node);
  const std::vector<int64_t> strides = ContiguousStrides(data_dims);
  const int64_t batch_stride = batch_dims > 0 ? strides[static_cast<size_t>(batch_dims - 1)] : 0;
  const int64_t batch_count = Product(data_dims, 0, static_cast<size_t>(batch_dims));
  const int64_t per_batch = batch_count > 0 ? tuples / batch_count : 0;
  offsets->resize(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      const auto a = static_cast<size_t>(batch_dims + j);
      int64_t v = idx[static_cast<size_t>(t * k + j)];
      if (v < -data_dims[a] || v >= data_dims[a]) {
        return OutOfRange("{} {}: index {} is out of range for axis {} of size {}", op, node, v, a,
                          data_dims[a]);
      }
      if (v < 0) v += data_dims[a];
      off += v * strides[a];
    }
    (*offsets)[static_cast<size_t>(t)] = off;
  }
  return Status::Ok();
}

Expected<TensorKernel> MakeGatherND(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  const std::vector<int64_t> data_dims = args.inputs[0].dims;
  const std::vector<int64_t>& id = args.inputs[1].dims;
  const int64_t batch_dims = args.a().Int("batch_dims").ok() ? *args.a().Int("batch_dims") : 0;
  const int64_t k = id.back();
  const int64_t tuples = Product(id, 0, id.size() - 1);
  const int64_t block =
      Product(data_dims, static_cast<size_t>(batch_dims + k), data_dims.size()) * static_cast<int64_t>(elem);
  const DType idx_type = args.inputs[1].dtype;
  const std::string op(args.op_type), node(args.node);
  TensorKernel k_;
  k_.impl = "memcpy-runs";
  k_.run = [=](const TensorCall& call) -> Status {
    std::vector<int64_t> offsets;
    KILN_RETURN_IF_ERROR(
        TupleOffsets(op, node, data_dims, batch_dims, idx_type, call.inputs[1], tuples, k, &offsets));
    const auto* in = static_cast<const uint8_t*>(call.inputs[0]);
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    for (int64_t t = 0; t < tuples; ++t) {
      std::memcpy(out + t * block, in + offsets[static_cast<size_t>(t)] * static_cast<int64_t>(elem),
                  static_cast<size_t>(block));
    }
    return Status::Ok();
  };
  return k_;
}

Expected<TensorKernel> MakeScatterND(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  KILN_ASSIGN_OR_RETURN(Reduction red, ParseReduction(args));
  KILN_ASSIGN_OR_RETURN(CombineFn combine, CombinerFor(args, red));
  const std::vector<int64_t> data_dims = args.inputs[0].dims;
  const std::vector<int64_t>& id = args.inputs[1].dims;
  const int64_t k = id.back();
  const int64_t tuples = Product(id, 0, id.size() - 1);
  const int64_t block = Product(data_dims, static_cast<size_t>(k), data_dims.size());
  const size_t bytes = args.outputs[0].Bytes();
  const DType idx_type = args.inputs[1].dtype;
  const std::string op(args.op_type), node(args.node);
  TensorKernel kernel;
  kernel.impl = "reference";
  kernel.run = [=](const TensorCall& call) -> Status {
    std::vector<int64_t> offsets;
    KILN_RETURN_IF_ERROR(TupleOffsets(op, node, data_dims, 0, idx_type, call.inputs[1], tuples, k, &offsets));
    auto* out = static_cast<uint8_t*>(call.outputs[0]);
    const auto* upd = static_cast<const uint8_t*>(call.inputs[2]);
    const auto e = static_cast<int64_t>(elem);
    if (call.outputs[0] != call.inputs[0]) ParallelMemcpy(out, call.inputs[0], bytes, call.pool);
    for (int64_t t = 0; t < tuples; ++t) {
      uint8_t* dst = out + offsets[static_cast<size_t>(t)] * e;
      const uint8_t* src = upd + t * block * e;
      if (red == Reduction::kNone || combine == nullptr) {
        std::memcpy(dst, src, static_cast<size_t>(block * e));
      } else {
        for (int64_t i = 0; i < block; ++i) combine(red, dst + i * e, src + i * e);
      }
    }
    return Status::Ok();
  };
  return kernel;
}

// Pad: constant mode fills and copies the overlap; the other modes read
// through per-axis index tables.
struct PadPlan {
  PadParams p;
  std::vector<std::vector<int64_t>> tables;  // reflect/edge/wrap
  StridedCopySpec interior;                  // constant
  int64_t src_offset = 0, dst_offset = 0;
  bool interior_empty = false;
};

int64_t SourceIndex(PadMode mode, int64_t i, int64_t d) {
  if (i >= 0 && i < d) return i;
  switch (mode) {
    case PadMode::kEdge: return std::clamp<int64_t>(i, 0, d - 1);
    case PadMode::kWrap: return ((i % d) + d) % d;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      const int64_t period = 2 * (d - 1);
      int64_t m = ((i % period) + period) % period;
      return m < d ? m : period - m;
    }
    case PadMode::kConstant: break;
  }
  return 0;
}

Expected<PadPlan> PlanPad(const OpParamSource& src, const TensorType& out, size_t elem) {
  PadPlan plan;
  KILN_ASSIGN_OR_RETURN(plan.p, ResolvePad(src));
  const std::vector<int64_t>& in = src.type(0).dims;
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] + plan.p.begin[a] + plan.p.end[a] != out.dims[a]) {
      return src.Error(
          fmt::format("the pads differ from the shape [{}] fixed at compile time", DimsToString(out.dims)));
    }
  }
  const std::vector<int64_t> is = ContiguousStrides(in), os = ContiguousStrides(out.dims);
  if (plan.p.mode == PadMode::kConstant) {
    plan.interior.elem_bytes = elem;
    for (size_t a = 0; a < in.size(); ++a) {
      const int64_t b = plan.p.begin[a];
      const int64_t n = in[a] + std::min<int64_t>(b, 0) + std::min<int64_t>(plan.p.end[a], 0);
      if (n <= 0) plan.interior_empty = true;
      plan.interior.dims.push_back(std::max<int64_t>(n, 0));
      plan.interior.src_strides.push_back(is[a]);
      plan.interior.dst_strides.push_back(os[a]);
      plan.src_offset += std::max<int64_t>(-b, 0) * is[a];
      plan.dst_offset += std::max<int64_t>(b, 0) * os[a];
    }
    return plan;
  }
  for (size_t a = 0; a < in.size(); ++a) {
    std::vector<int64_t> t(static_cast<size_t>(out.dims[a]));
    for (int64_t o = 0; o < out.dims[a]; ++o) {
      t[static_cast<size_t>(o)] = SourceIndex(plan.p.mode, o - plan.p.begin[a], in[a]) * is[a];
    }
    plan.tables.push_back(std::move(t));
  }
  return plan;
}

Expected<TensorKernel> MakePad(const TensorKernelArgs& args) {
  KILN_ASSIGN_OR_RETURN(size_t elem, MovableElementBytes(args.inputs[0].dtype));
  auto params = std::make_shared<KernelParams>(args);
  const TensorType out = args.outputs[0];
  const DType dtype = args.inputs[0].dtype;
  std::shared_ptr<const PadPlan> fixed;
  if (params->Known({1, 3})) {
    KILN_ASSIGN_OR_RETURN(PadPlan plan, PlanPad(params->AtBind(), out, elem));
    fixed = std::make_shared<const PadPlan>(std::move(plan));
  }
  TensorKernel k;
  k.impl = "strided-copy";
  k.run = [=](const TensorCall& call) -> Status {
    std::shared_ptr<const PadPlan> plan = fixed;
    if (!plan) {
      KILN_ASSIGN_OR_RETURN(PadPlan p, PlanPad(params->AtRun(call.inputs), out, elem));
      plan = std::make_shared<const PadPlan>(std::move(p));
    }
    const auto* in = static_cast<const uint8_t*>(call.inputs[0]);
    auto* dst = static_cast<uint8_t*>(call.outputs[0]);
    if (plan->p.mode != PadMode::kConstant) {
      IndexTableCopy(elem, plan->tables, in, dst, call.pool);
      return Status::Ok();
    }
    uint8_t fill[8] = {0};
    if (plan->p.value_from_input) {
      std::memcpy(fill, call.inputs[2], elem);
    } else {
      EncodeScalar(dtype, plan->p.value, fill);
    }
    FillElements(dst, fill, elem, out.ElementCount());
    if (!plan->interior_empty) {
      StridedCopy(plan->interior, in + plan->src_offset * static_cast<int64_t>(elem),
                  dst + plan->dst_offset * static_cast<int64_t>(elem), call.pool);
    }
    return Status::Ok();
  };
  return k;
}

// NonZero runs only where its shape was known (a compile-time input); the
// kernel recomputes it and checks the count.
Expected<TensorKernel> MakeNonZero(const TensorKernelArgs& args) {
  const TensorType in = args.inputs[0];
  const int64_t count = args.outputs[0].dims[1];
  const std::string op(args.op_type), node(args.node);
  TensorKernel k;
  k.impl = "reference";
  k.run = [=](const TensorCall& call) -> Status {
    std::vector<double> v;
    if (!ReadDoubles(in.dtype, call.inputs[0], in.ElementCount(), &v)) {
      return Unsupported("{} {}: dtype {} is not supported", op, node, DTypeName(in.dtype));
    }
    const auto rank = static_cast<int64_t>(in.dims.size());
    auto* out = static_cast<int64_t*>(call.outputs[0]);
    int64_t j = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == 0) continue;
      if (j >= count) break;
      auto rest = static_cast<int64_t>(i);
      for (int64_t a = rank - 1; a >= 0; --a) {
        out[a * count + j] = rest % in.dims[static_cast<size_t>(a)];
        rest /= in.dims[static_cast<size_t>(a)];
      }
      if (rank == 0) out[j] = 0;
      ++j;
    }
    int64_t total = 0;
    for (double x : v) total += x != 0 ? 1 : 0;
    if (total != count) {
      return Unsupported("{} {}: {} nonzero elements, but the shape fixed at compile time has {}", op, node,
                         total, count);
    }
    return Status::Ok();
  };
  return k;
}

}  // namespace

void AddShapeSelectKernels(std::vector<TensorKernelEntry>* kernels) {
  const std::vector<DType>& any = MovableDTypes();
  kernels->push_back({"Concat", MakeConcat, any, "", ConcatTakesLayout});
  kernels->push_back({"Split", MakeSplit, any, "split sizes known at compile time", SplitTakesLayout});
  kernels->push_back(
      {"Slice", MakeSlice, any, "starts/ends/axes/steps known at compile time", SliceTakesLayout});
  kernels->push_back({"Gather", MakeGather, any, "indices int32|int64"});
  kernels->push_back({"GatherElements", MakeGatherElements, any, "indices int32|int64"});
  kernels->push_back({"GatherND", MakeGatherND, any, "indices int32|int64"});
  kernels->push_back({"ScatterElements", MakeScatterElements, any,
                      "reduction none (any dtype) | add|mul|max|min (f32, f64, i64, i32, i8, u8)"});
  kernels->push_back({"Scatter", MakeScatterElements, any, "opsets 9-10 (ScatterElements)"});
  kernels->push_back({"ScatterND", MakeScatterND, any,
                      "reduction none (any dtype) | add|mul|max|min (f32, f64, i64, i32, i8, u8)"});
  kernels->push_back({"Pad", MakePad, any, "mode constant|reflect|edge|wrap; pads known at compile time"});
  kernels->push_back({"NonZero", MakeNonZero, any, "compile-time input only (folded)"});
}

}  // namespace kiln::cpu::shape_kernels
