#include "vision/ocr_preprocess.h"

#include <algorithm>
#include <cmath>

#include "vision/image_resize.h"

namespace kiln {
namespace {

// An image scaled to height h and a width of ceil(h * aspect) capped at
// max_width, written at the left of an f32[1, 3, h, tensor_width] tensor of
// zeros, B, G, R, as (x / 255 - 0.5) / 0.5.
HostTensor LinePatch(const Image& crop, int height, int max_width, int tensor_width) {
  const double aspect = static_cast<double>(crop.width) / crop.height;
  const int width = std::clamp(static_cast<int>(std::ceil(height * aspect)), 1, max_width);
  const Image scaled = ResizeBilinear(crop, width, height);
  HostTensor t(TensorType{DType::kF32, {1, 3, height, tensor_width}});
  float* out = t.data<float>();
  std::fill(out, out + 3 * static_cast<size_t>(height) * tensor_width, 0.0f);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const uint8_t* p = scaled.pixel(x, y);
      for (int c = 0; c < 3; ++c) {
        out[(static_cast<size_t>(c) * height + y) * tensor_width + x] = (p[2 - c] / 255.0f - 0.5f) / 0.5f;
      }
    }
  }
  return t;
}

}  // namespace

DetInput MakeDetInput(const Image& image, int max_side) {
  const int longer = std::max(image.width, image.height);
  const double ratio = longer > max_side ? static_cast<double>(max_side) / longer : 1.0;
  // int(side * ratio), then rounded to a multiple of 32 with halves to even
  // (Python's round).
  auto to32 = [](double v) {
    return std::max(static_cast<int>(std::nearbyint(static_cast<int>(v) / 32.0)) * 32, 32);
  };
  DetInput in;
  in.width = to32(image.width * ratio);
  in.height = to32(image.height * ratio);
  const Image scaled = ResizeBilinear(image, in.width, in.height);
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
  static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
  const int64_t h = in.height, w = in.width;
  in.tensor = HostTensor(TensorType{DType::kF32, {1, 3, h, w}});
  float* out = in.tensor.data<float>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const uint8_t* p = scaled.pixel(static_cast<int>(x), static_cast<int>(y));
      for (int c = 0; c < 3; ++c) out[(c * h + y) * w + x] = (p[2 - c] / 255.0f - kMean[c]) / kStd[c];
    }
  }
  return in;
}

HostTensor MakeClsInput(const Image& crop) { return LinePatch(crop, kClsHeight, kClsWidth, kClsWidth); }

int RecBucketWidth(int crop_width, int crop_height, int max_width) {
  const double needed = std::ceil(kRecHeight * static_cast<double>(crop_width) / crop_height);
  const int top = std::max(kRecBucketStep, max_width / kRecBucketStep * kRecBucketStep);
  const int bucket = static_cast<int>(std::ceil(needed / kRecBucketStep)) * kRecBucketStep;
  return std::clamp(bucket, kRecBucketStep, top);
}

HostTensor MakeRecInput(const Image& crop, int max_width) {
  const int bucket = RecBucketWidth(crop.width, crop.height, max_width);
  return LinePatch(crop, kRecHeight, bucket, bucket);
}

}  // namespace kiln
