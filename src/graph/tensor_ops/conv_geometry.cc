// Window geometry of the conv and pooling ops (see conv_geometry.h).
#include "graph/tensor_ops/conv_geometry.h"

#include <string>

#include "graph/tensor_type.h"

namespace kiln {
namespace {

Expected<std::vector<int64_t>> IntsOr(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                      const char* name, size_t size, int64_t fallback, int64_t min_value) {
  if (!attrs.Has(name)) return std::vector<int64_t>(size, fallback);
  auto v = attrs.Ints(name);
  if (!v.ok()) return InvalidArgument("{} {}: {}", op, node, v.status().message());
  if (v->size() != size) {
    return InvalidArgument("{} {}: attribute {} has {} values, the op needs {}", op, node, name, v->size(),
                           size);
  }
  for (int64_t e : *v) {
    if (e < min_value)
      return InvalidArgument("{} {}: attribute {} has the value {} (< {})", op, node, name, e, min_value);
  }
  return *v;
}

std::string AutoPad(const AttributeMap& attrs) {
  if (!attrs.Has("auto_pad")) return "NOTSET";
  auto s = attrs.String("auto_pad");
  return s.ok() ? *s : std::string("?");
}

// Fills stride, dilation, pads and `out` from the attributes, for a
// forward window (Conv, pooling).
Status ResolveForward(std::string_view op, std::string_view node, const AttributeMap& attrs, bool ceil_mode,
                      WindowGeometry* g) {
  const size_t s = static_cast<size_t>(g->spatial);
  KILN_ASSIGN_OR_RETURN(g->stride, IntsOr(op, node, attrs, "strides", s, 1, 1));
  KILN_ASSIGN_OR_RETURN(g->dilation, IntsOr(op, node, attrs, "dilations", s, 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsOr(op, node, attrs, "pads", 2 * s, 0, 0));
  const std::string auto_pad = AutoPad(attrs);
  g->pad_begin.assign(s, 0);
  g->pad_end.assign(s, 0);
  g->out.assign(s, 0);
  for (size_t i = 0; i < s; ++i) {
    const int64_t in = g->in[i], st = g->stride[i], dk = g->DilatedKernel(static_cast<int>(i));
    if (auto_pad == "NOTSET") {
      g->pad_begin[i] = pads[i];
      g->pad_end[i] = pads[i + s];
    } else if (auto_pad == "VALID") {
      // no padding
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + st - 1) / st;
      const int64_t total = std::max<int64_t>(0, (out - 1) * st + dk - in);
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    } else {
      return InvalidArgument("{} {}: auto_pad '{}' is none of NOTSET, SAME_UPPER, SAME_LOWER, VALID", op,
                             node, auto_pad);
    }
    const int64_t padded = in + g->pad_begin[i] + g->pad_end[i];
    if (dk > padded) {
      return InvalidArgument(
          "{} {}: the kernel ({} with dilation {}) is larger than the padded input ({}) along "
          "spatial axis {}",
          op, node, g->kernel[i], g->dilation[i], padded, i);
    }
    int64_t out = (padded - dk) / st + 1;
    if (ceil_mode) {
      out = (padded - dk + st - 1) / st + 1;
      // The last window must start inside the input or its left padding.
      if ((out - 1) * st >= in + g->pad_begin[i]) --out;
    }
    g->out[i] = out;
  }
  return Status::Ok();
}

Status CheckImage(std::string_view op, std::string_view node, const std::vector<int64_t>& x) {
  if (x.size() < 3) {
    return InvalidArgument("{} {}: input [{}] needs a batch, a channel and at least one spatial axis", op,
                           node, DimsToString(x));
  }
  for (int64_t d : x) {
    if (d <= 0) return InvalidArgument("{} {}: input [{}] has an empty axis", op, node, DimsToString(x));
  }
  return Status::Ok();
}

}  // namespace

int64_t IntAttrOr(const AttributeMap& attrs, const char* name, int64_t fallback) {
  auto v = attrs.Int(name);
  return v.ok() ? *v : fallback;
}

double FloatAttrOr(const AttributeMap& attrs, const char* name, double fallback) {
  if (!attrs.Has(name)) return fallback;
  auto v = attrs.Float(name);
  if (v.ok()) return *v;
  auto i = attrs.Int(name);
  return i.ok() ? static_cast<double>(*i) : fallback;
}

int64_t WindowGeometry::OutPixels() const {
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  return n;
}
int64_t WindowGeometry::InPixels() const {
  int64_t n = 1;
  for (int64_t d : in) n *= d;
  return n;
}
int64_t WindowGeometry::KernelTaps() const {
  int64_t n = 1;
  for (int64_t d : kernel) n *= d;
  return n;
}
std::vector<int64_t> WindowGeometry::OutputDims() const {
  std::vector<int64_t> dims = {batch, out_channels};
  dims.insert(dims.end(), out.begin(), out.end());
  return dims;
}

Expected<WindowGeometry> ConvGeometry(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                      const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  KILN_RETURN_IF_ERROR(CheckImage(op, node, x));
  if (w.size() != x.size()) {
    return InvalidArgument("{} {}: weight [{}] and input [{}] differ in rank", op, node, DimsToString(w),
                           DimsToString(x));
  }
  WindowGeometry g;
  g.spatial = static_cast<int>(x.size()) - 2;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  g.group = IntAttrOr(attrs, "group", 1);
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  for (int64_t d : w) {
    if (d <= 0) return InvalidArgument("{} {}: weight [{}] has an empty axis", op, node, DimsToString(w));
  }
  if (g.group < 1) return InvalidArgument("{} {}: group {} is not positive", op, node, g.group);
  if (g.in_channels != w[1] * g.group) {
    return InvalidArgument("{} {}: input channels {} != weight's {} x group {}", op, node, g.in_channels,
                           w[1], g.group);
  }
  if (g.out_channels % g.group != 0) {
    return InvalidArgument("{} {}: output channels {} are not a multiple of group {}", op, node,
                           g.out_channels, g.group);
  }
  if (attrs.Has("kernel_shape")) {
    auto ks = attrs.Ints("kernel_shape");
    if (!ks.ok() || *ks != g.kernel) {
      return InvalidArgument("{} {}: kernel_shape does not match the weight [{}]", op, node, DimsToString(w));
    }
  }
  KILN_RETURN_IF_ERROR(ResolveForward(op, node, attrs, /*ceil_mode=*/false, &g));
  return g;
}

Expected<WindowGeometry> ConvTransposeGeometry(std::string_view op, std::string_view node,
                                               const AttributeMap& attrs, const std::vector<int64_t>& x,
                                               const std::vector<int64_t>& w) {
  KILN_RETURN_IF_ERROR(CheckImage(op, node, x));
  if (w.size() != x.size()) {
    return InvalidArgument("{} {}: weight [{}] and input [{}] differ in rank", op, node, DimsToString(w),
                           DimsToString(x));
  }
  WindowGeometry g;
  g.spatial = static_cast<int>(x.size()) - 2;
  const size_t s = static_cast<size_t>(g.spatial);
  g.batch = x[0];
  g.in_channels = x[1];
  g.group = IntAttrOr(attrs, "group", 1);
  if (g.group < 1) return InvalidArgument("{} {}: group {} is not positive", op, node, g.group);
  for (int64_t d : w) {
    if (d <= 0) return InvalidArgument("{} {}: weight [{}] has an empty axis", op, node, DimsToString(w));
  }
  if (w[0] != g.in_channels || g.in_channels % g.group != 0) {
    return InvalidArgument(
        "{} {}: input channels {} != weight's first axis {} (or not a multiple of group {})", op, node,
        g.in_channels, w[0], g.group);
  }
  g.out_channels = w[1] * g.group;
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  KILN_ASSIGN_OR_RETURN(g.stride, IntsOr(op, node, attrs, "strides", s, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.dilation, IntsOr(op, node, attrs, "dilations", s, 1, 1));
  KILN_ASSIGN_OR_RETURN(g.output_padding, IntsOr(op, node, attrs, "output_padding", s, 0, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsOr(op, node, attrs, "pads", 2 * s, 0, 0));
  const std::string auto_pad = AutoPad(attrs);
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return InvalidArgument("{} {}: auto_pad '{}' is none of NOTSET, SAME_UPPER, SAME_LOWER, VALID", op, node,
                           auto_pad);
  }
  std::vector<int64_t> output_shape;
  if (attrs.Has("output_shape")) {
    auto os = attrs.Ints("output_shape");
    if (!os.ok()) return InvalidArgument("{} {}: {}", op, node, os.status().message());
    output_shape = *os;
    if (output_shape.size() == s + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (output_shape.size() != s) {
      return InvalidArgument("{} {}: output_shape has {} values for {} spatial axes", op, node,
                             output_shape.size(), s);
    }
  }
  g.pad_begin.assign(s, 0);
  g.pad_end.assign(s, 0);
  g.out.assign(s, 0);
  for (size_t i = 0; i < s; ++i) {
    const int64_t full =
        g.stride[i] * (g.in[i] - 1) + g.output_padding[i] + g.DilatedKernel(static_cast<int>(i));
    if (g.output_padding[i] >= std::max(g.stride[i], g.dilation[i])) {
      return InvalidArgument("{} {}: output_padding {} must be smaller than the stride or the dilation", op,
                             node, g.output_padding[i]);
    }
    int64_t target = -1;
    if (!output_shape.empty()) {
      target = output_shape[i];
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      target = g.in[i] * g.stride[i];
    }
    if (target >= 0) {
      // Negative when output_shape asks for more than the input covers:
      // the extra outputs (at the end) get only the bias.
      const int64_t total = full - target;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      // ONNX: SAME_UPPER puts the odd pad at the end, otherwise at the start.
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (auto_pad == "NOTSET") {
      g.pad_begin[i] = pads[i];
      g.pad_end[i] = pads[i + s];
    }
    g.out[i] = full - g.pad_begin[i] - g.pad_end[i];
    if (g.out[i] <= 0)
      return InvalidArgument("{} {}: the pads leave an empty output along spatial axis {}", op, node, i);
  }
  return g;
}

Expected<WindowGeometry> PoolGeometry(std::string_view op, std::string_view node, const AttributeMap& attrs,
                                      const std::vector<int64_t>& x) {
  KILN_RETURN_IF_ERROR(CheckImage(op, node, x));
  WindowGeometry g;
  g.spatial = static_cast<int>(x.size()) - 2;
  g.batch = x[0];
  g.in_channels = g.out_channels = x[1];
  g.in.assign(x.begin() + 2, x.end());
  if (!attrs.Has("kernel_shape"))
    return InvalidArgument("{} {}: the attribute kernel_shape is required", op, node);
  KILN_ASSIGN_OR_RETURN(g.kernel,
                        IntsOr(op, node, attrs, "kernel_shape", static_cast<size_t>(g.spatial), 1, 1));
  const bool ceil_mode = IntAttrOr(attrs, "ceil_mode", 0) != 0;
  KILN_RETURN_IF_ERROR(ResolveForward(op, node, attrs, ceil_mode, &g));
  for (int i = 0; i < g.spatial; ++i) {
    if (g.pad_begin[i] >= g.DilatedKernel(i) || g.pad_end[i] >= g.DilatedKernel(i)) {
      return InvalidArgument("{} {}: a pad ({} / {}) as large as the window ({}) along spatial axis {}", op,
                             node, g.pad_begin[i], g.pad_end[i], g.DilatedKernel(i), i);
    }
  }
  return g;
}

}  // namespace kiln
