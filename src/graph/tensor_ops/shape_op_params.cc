// Parameters of the shape family's ops, shared by inference and kernels.
#include "graph/tensor_ops/shape_op_params.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace kiln::shape_ops {
namespace {

template <typename T, typename Out>
void Widen(const void* data, int64_t n, std::vector<Out>* out) {
  out->resize(static_cast<size_t>(n));
  const auto* p = static_cast<const uint8_t*>(data);
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    (*out)[static_cast<size_t>(i)] = static_cast<Out>(v);
  }
}

}  // namespace

bool ReadInts(DType dtype, const void* data, int64_t n, std::vector<int64_t>* out) {
  switch (dtype) {
    case DType::kI64: Widen<int64_t>(data, n, out); return true;
    case DType::kI32: Widen<int32_t>(data, n, out); return true;
    case DType::kI16: Widen<int16_t>(data, n, out); return true;
    case DType::kI8: Widen<int8_t>(data, n, out); return true;
    case DType::kU8:
    case DType::kBool: Widen<uint8_t>(data, n, out); return true;
    default: return false;
  }
}

bool ReadDoubles(DType dtype, const void* data, int64_t n, std::vector<double>* out) {
  switch (dtype) {
    case DType::kF32: Widen<float>(data, n, out); return true;
    case DType::kF64: Widen<double>(data, n, out); return true;
    case DType::kF16:
    case DType::kBF16: {
      std::vector<int64_t> bits;
      Widen<uint16_t>(data, n, &bits);
      out->resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const auto h = static_cast<uint16_t>(bits[static_cast<size_t>(i)]);
        (*out)[static_cast<size_t>(i)] = dtype == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
      }
      return true;
    }
    default: {
      std::vector<int64_t> ints;
      if (!ReadInts(dtype, data, n, &ints)) return false;
      out->assign(ints.begin(), ints.end());
      return true;
    }
  }
}

Status OpParamSource::Error(const std::string& message) const {
  return InvalidArgument("{} {}: {}", op_type, node, message);
}

Expected<int64_t> OpParamSource::Axis(int64_t axis, int64_t rank, const char* what) const {
  if (axis < -rank || axis >= rank) {
    return Error(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Expected<std::vector<int64_t>> OpParamSource::Ints(size_t i, const char* what) const {
  if (!has(i)) return Error(fmt::format("the {} input is missing", what));
  if (i >= values.size() || values[i] == nullptr) {
    return Unsupported(
        "{} {}: the {} input is computed at run time; kiln compiles static shapes (fix the input "
        "shapes with --input-shape, or fold it in the exporter)",
        op_type, node, what);
  }
  std::vector<int64_t> out;
  if (!ReadInts(type(i).dtype, values[i], type(i).ElementCount(), &out)) {
    return Error(fmt::format("the {} input must be an integer tensor, got {}", what, type(i).ToString()));
  }
  return out;
}

Expected<std::vector<double>> OpParamSource::Doubles(size_t i, const char* what) const {
  if (!has(i)) return Error(fmt::format("the {} input is missing", what));
  if (i >= values.size() || values[i] == nullptr) {
    return Unsupported("{} {}: the {} input is computed at run time; kiln needs it at compile time", op_type,
                       node, what);
  }
  std::vector<double> out;
  if (!ReadDoubles(type(i).dtype, values[i], type(i).ElementCount(), &out)) {
    return Error(fmt::format("the {} input has dtype {}, not a number type", what, DTypeName(type(i).dtype)));
  }
  return out;
}

int64_t OpParamSource::IntAttr(const std::string& name, int64_t fallback) const {
  auto v = attrs->Int(name);
  return v.ok() ? *v : fallback;
}

double OpParamSource::FloatAttr(const std::string& name, double fallback) const {
  auto v = attrs->Float(name);
  if (v.ok()) return *v;
  auto i = attrs->Int(name);
  return i.ok() ? static_cast<double>(*i) : fallback;
}

std::string OpParamSource::StringAttr(const std::string& name, const std::string& fallback) const {
  auto v = attrs->String(name);
  return v.ok() ? *v : fallback;
}

std::optional<std::vector<int64_t>> OpParamSource::IntsAttr(const std::string& name) const {
  auto v = attrs->Ints(name);
  if (v.ok()) return *v;
  auto one = attrs->Int(name);  // a one-element list may arrive as an int
  if (one.ok()) return std::vector<int64_t>{*one};
  return std::nullopt;
}

std::optional<std::vector<double>> OpParamSource::FloatsAttr(const std::string& name) const {
  auto v = attrs->Floats(name);
  if (v.ok()) return *v;
  auto one = attrs->Float(name);
  if (one.ok()) return std::vector<double>{*one};
  return std::nullopt;
}

OpParamSource ParamSourceFromContext(const ShapeContext& ctx) {
  OpParamSource src;
  src.op_type = ctx.op_type;
  src.node = ctx.node;
  src.attrs = ctx.attrs;
  for (const TensorOpInput& in : ctx.inputs) {
    src.types.push_back(in.type);
    src.values.push_back(in.constant != nullptr && !in.constant->empty() ? in.constant->data() : nullptr);
  }
  return src;
}

Expected<std::vector<int64_t>> ResolveReshapeDims(const OpParamSource& src) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, src.Ints(1, "shape"));
  const std::vector<int64_t>& in = src.type(0).dims;
  const bool allowzero = src.IntAttr("allowzero", 0) != 0;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size()) {
        return src.Error(fmt::format("shape [{}] copies dim {} (0) but the input [{}] has rank {}",
                                     DimsToString(shape), i, DimsToString(in), in.size()));
      }
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer_at >= 0)
        return src.Error(fmt::format("shape [{}] has more than one -1", DimsToString(shape)));
      infer_at = static_cast<int>(i);
      continue;
    }
    if (shape[i] < 0) return src.Error(fmt::format("shape [{}] has a negative dim", DimsToString(shape)));
    known *= shape[i];
  }
  const int64_t total = src.type(0).ElementCount();
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return src.Error(fmt::format("cannot reshape [{}] ({} elements) to [{}]", DimsToString(in), total,
                                   DimsToString(shape)));
    }
    shape[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return src.Error(fmt::format("cannot reshape [{}] ({} elements) to [{}] ({} elements)", DimsToString(in),
                                 total, DimsToString(shape), known));
  }
  return shape;
}

namespace {

// Axes from the attribute `axes` (older opsets) or input 1 (opset 13+).
Expected<std::optional<std::vector<int64_t>>> AxesAttrOrInput(const OpParamSource& src) {
  if (src.has(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, src.Ints(1, "axes"));
    return std::optional<std::vector<int64_t>>(axes);
  }
  return src.IntsAttr("axes");
}

Status NormalizeAxes(const OpParamSource& src, int64_t rank, std::vector<int64_t>* axes) {
  for (int64_t& a : *axes) {
    KILN_ASSIGN_OR_RETURN(a, src.Axis(a, rank));
  }
  std::vector<int64_t> sorted = *axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return src.Error(fmt::format("axes [{}] repeat an axis", DimsToString(*axes)));
  }
  *axes = sorted;
  return Status::Ok();
}

}  // namespace

Expected<std::vector<int64_t>> ResolveSqueezeAxes(const OpParamSource& src, int64_t rank, bool* all_ones) {
  KILN_ASSIGN_OR_RETURN(auto given, AxesAttrOrInput(src));
  *all_ones = !given.has_value();
  std::vector<int64_t> axes;
  if (!given) {
    for (int64_t i = 0; i < rank; ++i) {
      if (src.type(0).dims[static_cast<size_t>(i)] == 1) axes.push_back(i);
    }
    return axes;
  }
  axes = *given;
  KILN_RETURN_IF_ERROR(NormalizeAxes(src, rank, &axes));
  for (int64_t a : axes) {
    if (src.type(0).dims[static_cast<size_t>(a)] != 1) {
      return src.Error(fmt::format("cannot squeeze axis {} of [{}]: its size is not 1", a,
                                   DimsToString(src.type(0).dims)));
    }
  }
  return axes;
}

Expected<std::vector<int64_t>> ResolveUnsqueezeAxes(const OpParamSource& src) {
  KILN_ASSIGN_OR_RETURN(auto given, AxesAttrOrInput(src));
  if (!given) return src.Error("needs axes (the attribute before opset 13, input 1 after)");
  std::vector<int64_t> axes = *given;
  const int64_t out_rank = src.rank0() + static_cast<int64_t>(axes.size());
  KILN_RETURN_IF_ERROR(NormalizeAxes(src, out_rank, &axes));
  return axes;
}

Expected<std::vector<int64_t>> ResolvePermutation(const OpParamSource& src, int64_t rank) {
  std::vector<int64_t> perm;
  if (auto p = src.IntsAttr("perm")) {
    perm = *p;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return src.Error(
        fmt::format("perm [{}] has {} entries for rank {}", DimsToString(perm), perm.size(), rank));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    KILN_ASSIGN_OR_RETURN(p, src.Axis(p, rank, "perm entry"));
    if (seen[static_cast<size_t>(p)])
      return src.Error(fmt::format("perm [{}] repeats an axis", DimsToString(perm)));
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Expected<SliceParams> ResolveSlice(const OpParamSource& src) {
  const std::vector<int64_t>& dims = src.type(0).dims;
  const int64_t rank = src.rank0();
  std::vector<int64_t> starts, ends, axes, steps;
  if (!src.has(1) && src.IntsAttr("starts")) {  // opset 1: attributes
    starts = *src.IntsAttr("starts");
    auto e = src.IntsAttr("ends");
    if (!e) return src.Error("has the starts attribute but no ends");
    ends = *e;
    if (auto a = src.IntsAttr("axes")) axes = *a;
  } else {
    KILN_ASSIGN_OR_RETURN(starts, src.Ints(1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, src.Ints(2, "ends"));
    if (src.has(3)) {
      KILN_ASSIGN_OR_RETURN(axes, src.Ints(3, "axes"));
    }
    if (src.has(4)) {
      KILN_ASSIGN_OR_RETURN(steps, src.Ints(4, "steps"));
    }
  }
  if (ends.size() != starts.size()) {
    return src.Error(fmt::format("starts has {} entries but ends {}", starts.size(), ends.size()));
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return src.Error(fmt::format("starts, ends, axes and steps differ in length ({}, {}, {}, {})",
                                 starts.size(), ends.size(), axes.size(), steps.size()));
  }
  SliceParams p;
  p.start.assign(static_cast<size_t>(rank), 0);
  p.step.assign(static_cast<size_t>(rank), 1);
  p.count = dims;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(axes[i], rank));
    if (seen[static_cast<size_t>(axis)]) return src.Error(fmt::format("axis {} is sliced twice", axis));
    seen[static_cast<size_t>(axis)] = true;
    const int64_t d = dims[static_cast<size_t>(axis)];
    const int64_t step = steps[i];
    if (step == 0) return src.Error(fmt::format("step 0 on axis {}", axis));
    int64_t start = starts[i] < 0 ? starts[i] + d : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + d : ends[i];
    int64_t count;
    if (d == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, d - 1);
      end = std::clamp<int64_t>(end, -1, d - 1);
      count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    p.start[static_cast<size_t>(axis)] = count > 0 ? start : 0;
    p.step[static_cast<size_t>(axis)] = step;
    p.count[static_cast<size_t>(axis)] = count;
  }
  return p;
}

Expected<SplitParams> ResolveSplit(const OpParamSource& src, int num_outputs) {
  SplitParams p;
  const int64_t rank = src.rank0();
  KILN_ASSIGN_OR_RETURN(p.axis, src.Axis(src.IntAttr("axis", 0), rank));
  const int64_t d = src.type(0).dims[static_cast<size_t>(p.axis)];
  if (src.has(1)) {
    KILN_ASSIGN_OR_RETURN(p.sizes, src.Ints(1, "split"));
  } else if (auto s = src.IntsAttr("split")) {
    p.sizes = *s;
  } else {
    const int64_t n = src.IntAttr("num_outputs", num_outputs);
    if (n != num_outputs) {
      return src.Error(fmt::format("num_outputs {} but the node has {} outputs", n, num_outputs));
    }
    // Equal parts; with opset 18's num_outputs the last may be smaller.
    const int64_t part = (d + n - 1) / n;
    if (!src.attrs->Has("num_outputs") && d % n != 0) {
      return src.Error(fmt::format("axis {} of size {} does not split into {} equal parts", p.axis, d, n));
    }
    int64_t left = d;
    for (int64_t i = 0; i < n; ++i) {
      p.sizes.push_back(std::min(part, left));
      left -= p.sizes.back();
    }
  }
  if (static_cast<int>(p.sizes.size()) != num_outputs) {
    return src.Error(fmt::format("split [{}] has {} parts for {} outputs", DimsToString(p.sizes),
                                 p.sizes.size(), num_outputs));
  }
  int64_t sum = 0;
  for (int64_t s : p.sizes) {
    if (s < 0) return src.Error(fmt::format("split [{}] has a negative size", DimsToString(p.sizes)));
    sum += s;
  }
  if (sum != d) {
    return src.Error(
        fmt::format("split [{}] sums to {}, but axis {} has size {}", DimsToString(p.sizes), sum, p.axis, d));
  }
  return p;
}

Expected<PadParams> ResolvePad(const OpParamSource& src) {
  PadParams p;
  const int64_t rank = src.rank0();
  const std::string mode = src.StringAttr("mode", "constant");
  if (mode == "constant") {
    p.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    p.mode = PadMode::kEdge;
  } else if (mode == "wrap") {
    p.mode = PadMode::kWrap;
  } else {
    return src.Error(fmt::format("unknown mode '{}' (constant, reflect, edge, wrap)", mode));
  }
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  if (src.has(1)) {
    KILN_ASSIGN_OR_RETURN(pads, src.Ints(1, "pads"));
    if (src.has(2)) {
      if (src.type(2).ElementCount() != 1) return src.Error("constant_value must be a scalar");
      p.value_from_input = true;
    }
    if (src.has(3)) {
      KILN_ASSIGN_OR_RETURN(axes, src.Ints(3, "axes"));
    }
  } else if (auto a = src.IntsAttr("pads")) {  // before opset 11
    pads = *a;
    p.value = src.FloatAttr("value", 0.0);
  } else {
    return src.Error("needs pads (the attribute before opset 11, input 1 after)");
  }
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) {
    return src.Error(fmt::format("pads [{}] must have 2 x {} entries", DimsToString(pads), axes.size()));
  }
  p.begin.assign(static_cast<size_t>(rank), 0);
  p.end.assign(static_cast<size_t>(rank), 0);
  const size_t n = axes.size();
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, src.Axis(axes[i], rank));
    p.begin[static_cast<size_t>(axis)] = pads[i];
    p.end[static_cast<size_t>(axis)] = pads[i + n];
  }
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    const int64_t d = src.type(0).dims[a];
    if (d + p.begin[a] + p.end[a] < 0) {
      return src.Error(fmt::format("pads [{}] crop axis {} of size {} below zero", DimsToString(pads), a, d));
    }
    if (p.mode != PadMode::kConstant && (p.begin[a] < 0 || p.end[a] < 0)) {
      return src.Error(
          fmt::format("negative pads are only allowed in constant mode, got [{}]", DimsToString(pads)));
    }
    if (p.mode != PadMode::kConstant && d == 0 && (p.begin[a] > 0 || p.end[a] > 0)) {
      return src.Error(fmt::format("cannot pad the empty axis {} in {} mode", a, mode));
    }
  }
  return p;
}

namespace {

Status ParseResizeModes(const OpParamSource& src, bool legacy, ResizeParams* p) {
  const std::string mode = src.StringAttr("mode", "nearest");
  if (mode == "nearest") {
    p->mode = ResizeMode::kNearest;
  } else if (mode == "linear" || mode == "bilinear") {
    p->mode = ResizeMode::kLinear;
  } else if (mode == "cubic" && !legacy) {
    p->mode = ResizeMode::kCubic;
  } else {
    return src.Error(fmt::format("unknown mode '{}'", mode));
  }
  if (legacy) {  // Upsample and Resize-10: asymmetric coordinates, nearest truncating
    p->coordinates = ResizeCoordinates::kAsymmetric;
    p->nearest = ResizeNearest::kSimple;
    return Status::Ok();
  }
  const std::string coord = src.StringAttr("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") {
    p->coordinates = ResizeCoordinates::kHalfPixel;
  } else if (coord == "half_pixel_symmetric") {
    p->coordinates = ResizeCoordinates::kHalfPixelSymmetric;
  } else if (coord == "pytorch_half_pixel") {
    p->coordinates = ResizeCoordinates::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    p->coordinates = ResizeCoordinates::kAlignCorners;
  } else if (coord == "asymmetric") {
    p->coordinates = ResizeCoordinates::kAsymmetric;
  } else if (coord == "tf_half_pixel_for_nn") {
    p->coordinates = ResizeCoordinates::kTfHalfPixelForNn;
  } else if (coord == "tf_crop_and_resize") {
    p->coordinates = ResizeCoordinates::kTfCropAndResize;
  } else {
    return src.Error(fmt::format("unknown coordinate_transformation_mode '{}'", coord));
  }
  const std::string nearest = src.StringAttr("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    p->nearest = ResizeNearest::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    p->nearest = ResizeNearest::kRoundPreferCeil;
  } else if (nearest == "floor") {
    p->nearest = ResizeNearest::kFloor;
  } else if (nearest == "ceil") {
    p->nearest = ResizeNearest::kCeil;
  } else {
    return src.Error(fmt::format("unknown nearest_mode '{}'", nearest));
  }
  p->cubic_a = src.FloatAttr("cubic_coeff_a", -0.75);
  p->exclude_outside = src.IntAttr("exclude_outside", 0) != 0;
  p->extrapolation_value = src.FloatAttr("extrapolation_value", 0.0);
  if (src.IntAttr("antialias", 0) != 0) {
    return Unsupported("{} {}: antialias=1 is not supported (export without antialiasing)", src.op_type,
                       src.node);
  }
  return Status::Ok();
}

}  // namespace

Expected<ResizeParams> ResolveResize(const OpParamSource& src) {
  ResizeParams p;
  const int64_t rank = src.rank0();
  p.in_dims = src.type(0).dims;
  const bool upsample = src.op_type == "Upsample";
  // Resize-10 has (X, scales); 11+ has (X, roi, scales, sizes).
  const bool resize10 = !upsample && !src.has(2) && !src.has(3);
  KILN_RETURN_IF_ERROR(ParseResizeModes(src, upsample || resize10, &p));
  std::vector<int64_t> axes;
  if (auto a = src.IntsAttr("axes")) {
    axes = *a;
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    KILN_ASSIGN_OR_RETURN(a, src.Axis(a, rank, "axes entry"));
  }

  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;
  if (upsample) {
    if (src.has(1)) {
      KILN_ASSIGN_OR_RETURN(scales, src.Doubles(1, "scales"));
    } else if (auto s = src.FloatsAttr("scales")) {
      scales = *s;
    } else {
      return src.Error("needs scales (the attribute before opset 9, input 1 after)");
    }
  } else if (resize10) {
    KILN_ASSIGN_OR_RETURN(scales, src.Doubles(1, "scales"));
  } else {
    if (src.has(1) && src.type(1).ElementCount() > 0) {
      KILN_ASSIGN_OR_RETURN(roi, src.Doubles(1, "roi"));
    }
    if (src.has(2) && src.type(2).ElementCount() > 0) {
      KILN_ASSIGN_OR_RETURN(scales, src.Doubles(2, "scales"));
    }
    if (src.has(3) && src.type(3).ElementCount() > 0) {
      KILN_ASSIGN_OR_RETURN(sizes, src.Ints(3, "sizes"));
    }
    if (scales.empty() == sizes.empty()) return src.Error("needs exactly one of scales and sizes");
  }
  const size_t n = axes.size();
  if (!scales.empty() && scales.size() != n) {
    return src.Error(fmt::format("has {} scales for {} axes", scales.size(), n));
  }
  if (!sizes.empty() && sizes.size() != n)
    return src.Error(fmt::format("has {} sizes for {} axes", sizes.size(), n));
  if (!roi.empty() && roi.size() != 2 * n)
    return src.Error(fmt::format("has {} roi values for {} axes", roi.size(), n));

  p.scales.assign(static_cast<size_t>(rank), 1.0f);
  p.roi_start.assign(static_cast<size_t>(rank), 0.0f);
  p.roi_end.assign(static_cast<size_t>(rank), 1.0f);
  p.out_dims = p.in_dims;
  if (!scales.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const auto a = static_cast<size_t>(axes[i]);
      const auto s = static_cast<float>(scales[i]);
      if (!(s > 0)) return src.Error(fmt::format("scale {} on axis {} is not positive", scales[i], a));
      p.scales[a] = s;
      p.out_dims[a] =
          static_cast<int64_t>(std::floor(static_cast<double>(p.in_dims[a]) * static_cast<double>(s)));
    }
  } else {
    const std::string policy = src.StringAttr("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return src.Error(fmt::format("unknown keep_aspect_ratio_policy '{}'", policy));
    }
    float common = policy == "not_larger" ? std::numeric_limits<float>::max() : 0.0f;
    for (size_t i = 0; i < n; ++i) {
      const auto a = static_cast<size_t>(axes[i]);
      if (sizes[i] < 0) return src.Error(fmt::format("size {} on axis {} is negative", sizes[i], a));
      if (p.in_dims[a] == 0) return src.Error(fmt::format("cannot resize the empty axis {}", a));
      const float s = static_cast<float>(sizes[i]) / static_cast<float>(p.in_dims[a]);
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
      p.scales[a] = s;
      p.out_dims[a] = sizes[i];
    }
    if (policy != "stretch") {
      for (size_t i = 0; i < n; ++i) {
        const auto a = static_cast<size_t>(axes[i]);
        p.scales[a] = common;
        p.out_dims[a] = static_cast<int64_t>(std::round(static_cast<double>(p.in_dims[a]) * common));
      }
    }
  }
  if (!roi.empty()) {
    for (size_t i = 0; i < n; ++i) {
      const auto a = static_cast<size_t>(axes[i]);
      p.roi_start[a] = static_cast<float>(roi[i]);
      p.roi_end[a] = static_cast<float>(roi[i + n]);
    }
  }
  return p;
}

float ResizeSourceCoordinate(const ResizeParams& p, size_t axis, int64_t x) {
  const float scale = p.scales[axis];
  const auto in_len = static_cast<float>(p.in_dims[axis]);
  const auto out_len = static_cast<float>(p.out_dims[axis]);
  const auto xf = static_cast<float>(x);
  switch (p.coordinates) {
    case ResizeCoordinates::kHalfPixel: return (xf + 0.5f) / scale - 0.5f;
    case ResizeCoordinates::kHalfPixelSymmetric: {
      const float adjustment = out_len / (scale * in_len);
      const float center = in_len / 2;
      const float offset = center * (1 - adjustment);
      return offset + (xf + 0.5f) / scale - 0.5f;
    }
    case ResizeCoordinates::kPytorchHalfPixel: return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoordinates::kAlignCorners: return out_len == 1 ? 0.0f : xf * (in_len - 1) / (out_len - 1);
    case ResizeCoordinates::kAsymmetric: return xf / scale;
    case ResizeCoordinates::kTfHalfPixelForNn: return (xf + 0.5f) / scale;
    case ResizeCoordinates::kTfCropAndResize: {
      const float start = p.roi_start[axis];
      const float end = p.roi_end[axis];
      if (out_len > 1) return start * (in_len - 1) + xf * (end - start) * (in_len - 1) / (out_len - 1);
      return 0.5f * (start + end) * (in_len - 1);
    }
  }
  return xf;
}

Expected<BlockParams> ResolveBlock(const OpParamSource& src) {
  BlockParams b;
  b.block = src.IntAttr("blocksize", 0);
  if (b.block <= 0) return src.Error(fmt::format("blocksize {} must be positive", b.block));
  const std::string mode = src.StringAttr("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return src.Error(fmt::format("unknown mode '{}' (DCR or CRD)", mode));
  b.crd = mode == "CRD";
  if (src.rank0() != 4) {
    return src.Error(fmt::format("takes a 4-d NCHW input, got {}", src.type(0).ToString()));
  }
  return b;
}

}  // namespace kiln::shape_ops
