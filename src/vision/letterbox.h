// The detectors' input: the image letterboxed as Ultralytics YOLOv8 does
// (its LetterBox transform with auto=False, center=True):
//   - the target size is the model input's H x W (e.g. 640 x 640);
//   - the image is scaled by r = min(H / h, W / w), keeping its aspect, to
//     round(w r) x round(h r) with bilinear interpolation (OpenCV
//     INTER_LINEAR; images are scaled up as well as down);
//   - the rest is padding of value 114 in every channel, split evenly
//     around the image (left = round(dw - 0.1), top = round(dh - 0.1) for
//     dw, dh the total horizontal and vertical padding over 2);
//   - channels in RGB order, values scaled to [0, 1] (x / 255), laid out
//     NCHW as float32: [1, 3, H, W].
// Boxes found in the letterboxed input map back to the original image by
// undoing the padding and the scale, then clipping to the image.
#pragma once

#include <vector>

#include "onnx/onnx_session.h"
#include "vision/image.h"

namespace kiln {

struct LetterboxGeometry {
  int source_width = 0, source_height = 0;
  int target_width = 0, target_height = 0;
  float scale = 1;  // r
  int resized_width = 0, resized_height = 0;
  int pad_left = 0, pad_top = 0;
};

constexpr int kLetterboxPadValue = 114;

// REQUIRES: all sizes > 0.
LetterboxGeometry ComputeLetterbox(int source_width, int source_height, int target_width, int target_height);

// The letterboxed RGB image (target size).
Image LetterboxImage(const Image& image, const LetterboxGeometry& g);

// The model input: f32[1, 3, H, W], RGB, x / 255.
HostTensor LetterboxTensor(const Image& image, const LetterboxGeometry& g);

// A box (x1, y1, x2, y2) in input pixels mapped to original-image pixels,
// clipped to [0, width] x [0, height].
void MapBoxToSource(const LetterboxGeometry& g, float box[4]);

}  // namespace kiln
