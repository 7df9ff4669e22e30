// The PP-OCR models' inputs, as PaddleOCR's defaults make them. PaddleOCR
// reads images with OpenCV, so every model sees channels in B, G, R order.
//   - detection: the image scaled (bilinear) so that its longer side is at
//     most `max_side` (960; never scaled up), then each side rounded to a
//     multiple of 32 (at least 32); values x / 255 normalized per channel
//     with mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225) applied
//     to the B, G, R channels in that order (PaddleOCR's NormalizeImage on a
//     BGR image); f32[1, 3, H, W].
//   - direction classification: the crop scaled to height 48 keeping its
//     aspect, width at most 192, right-padded with 0 to 192; values
//     (x / 255 - 0.5) / 0.5; f32[1, 3, 48, 192].
//   - recognition: the same at height 48, width padded to the first shape
//     bucket (320, 640, 960, ... up to `max_width`) that holds the scaled
//     crop; a wider crop is squeezed to `max_width`. One Program is
//     compiled per bucket.
#pragma once

#include "onnx/onnx_session.h"
#include "vision/image.h"

namespace kiln {

struct DetInput {
  HostTensor tensor;
  int width = 0, height = 0;  // the map size (the input's W and H)
};

DetInput MakeDetInput(const Image& image, int max_side = 960);

constexpr int kClsHeight = 48, kClsWidth = 192;
constexpr int kRecHeight = 48, kRecBucketStep = 320;

HostTensor MakeClsInput(const Image& crop);

// The width bucket of a crop (a multiple of 320, at most max_width).
int RecBucketWidth(int crop_width, int crop_height, int max_width);
HostTensor MakeRecInput(const Image& crop, int max_width = 3200);

}  // namespace kiln
