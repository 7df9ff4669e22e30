// The parameters of the shape family's ops that come from attributes or
// from small inputs (Slice's starts, Pad's pads, Resize's scales), resolved
// by one function each, so that shape inference and the CPU kernels agree
// on them. Shape inference reads the inputs' compile-time values; a kernel
// reads them from its constants or, when they arrive at run time, from the
// call's buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/attribute_map.h"
#include "graph/tensor_op.h"
#include "graph/tensor_type.h"

namespace kiln::shape_ops {

struct OpParamSource {
  std::string_view op_type;
  std::string_view node;
  const AttributeMap* attrs = nullptr;
  std::vector<const TensorType*> types;  // nullptr: an omitted input
  std::vector<const void*> values;       // nullptr: the value is not known here

  bool has(size_t i) const { return i < types.size() && types[i] != nullptr; }
  const TensorType& type(size_t i) const { return *types[i]; }
  int rank0() const { return types[0]->rank(); }

  // Input i's elements (an integer or bool tensor) / as doubles (any plain
  // dtype); errors when it is omitted or its value is not known.
  Expected<std::vector<int64_t>> Ints(size_t i, const char* what) const;
  Expected<std::vector<double>> Doubles(size_t i, const char* what) const;

  int64_t IntAttr(const std::string& name, int64_t fallback) const;
  double FloatAttr(const std::string& name, double fallback) const;
  std::string StringAttr(const std::string& name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> IntsAttr(const std::string& name) const;
  std::optional<std::vector<double>> FloatsAttr(const std::string& name) const;

  // "<op> <node>: " + message, as InvalidArgument.
  Status Error(const std::string& message) const;
  // axis in [-rank, rank) made non-negative, or an error naming `what`.
  Expected<int64_t> Axis(int64_t axis, int64_t rank, const char* what = "axis") const;
};

// The source for shape inference: values are the inputs' constants.
OpParamSource ParamSourceFromContext(const ShapeContext& ctx);

// Reads n elements of a plain integer/bool dtype as int64; false for other dtypes.
bool ReadInts(DType dtype, const void* data, int64_t n, std::vector<int64_t>* out);
// Reads n elements of any plain dtype as double; false for block-quantized ones.
bool ReadDoubles(DType dtype, const void* data, int64_t n, std::vector<double>* out);

// The kiln dtype of an ONNX TensorProto data type number (Cast's `to`, EyeLike's dtype).
Expected<DType> DTypeFromOnnxNumber(int64_t onnx_type);

// Reshape's output dims (0 copies the input's dim unless allowzero, one -1 is inferred).
Expected<std::vector<int64_t>> ResolveReshapeDims(const OpParamSource& src);

// Squeeze/Unsqueeze axes (attribute before opset 13, input after), normalized
// and sorted; Squeeze without axes takes every size-1 axis (*all_ones set).
Expected<std::vector<int64_t>> ResolveSqueezeAxes(const OpParamSource& src, int64_t rank, bool* all_ones);
Expected<std::vector<int64_t>> ResolveUnsqueezeAxes(const OpParamSource& src);

// Transpose's permutation (reversed axes by default), checked.
Expected<std::vector<int64_t>> ResolvePermutation(const OpParamSource& src, int64_t rank);

// Per axis of the data: the first element taken, the step, and how many.
struct SliceParams {
  std::vector<int64_t> start;
  std::vector<int64_t> step;
  std::vector<int64_t> count;
};
Expected<SliceParams> ResolveSlice(const OpParamSource& src);

// Split's axis and the sizes of the outputs along it.
struct SplitParams {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
};
Expected<SplitParams> ResolveSplit(const OpParamSource& src, int num_outputs);

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
struct PadParams {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin;  // per axis; negative crops
  std::vector<int64_t> end;
  double value = 0;               // constant mode's fill
  bool value_from_input = false;  // the fill is input 2's scalar (read in the data's dtype)
};
Expected<PadParams> ResolvePad(const OpParamSource& src);

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoordinates {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinates coordinates = ResizeCoordinates::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  std::vector<int64_t> in_dims;
  std::vector<int64_t> out_dims;
  std::vector<float> scales;     // per axis, output over input
  std::vector<float> roi_start;  // per axis (tf_crop_and_resize), normalized
  std::vector<float> roi_end;
};
// Resize (opsets 10, 11, 13, 18 forms) and Upsample (7, 9).
Expected<ResizeParams> ResolveResize(const OpParamSource& src);

// The source coordinate of output index x along one axis (before rounding
// or interpolation), as ONNX's coordinate_transformation_mode says.
float ResizeSourceCoordinate(const ResizeParams& p, size_t axis, int64_t x);

// DepthToSpace/SpaceToDepth's block size and (DepthToSpace) mode.
struct BlockParams {
  int64_t block = 1;
  bool crd = false;  // DepthToSpace mode CRD (else DCR)
};
Expected<BlockParams> ResolveBlock(const OpParamSource& src);

}  // namespace kiln::shape_ops
