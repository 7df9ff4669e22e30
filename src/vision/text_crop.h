// A detected text box cut out of the image as an upright, axis-aligned
// crop, as PaddleOCR's get_rotate_crop_image: width = the longer of the
// top and bottom edges, height = the longer of the left and right edges
// (both truncated to integers); the quadrilateral is mapped onto that
// rectangle by the perspective transform through its four corners and
// sampled bicubically as OpenCV's INTER_CUBIC (edge pixels repeated outside
// the image); a crop at
// least 1.5 times as tall as wide is rotated 90 degrees counterclockwise
// (vertical text read as a line).
#pragma once

#include <array>

#include "core/status.h"
#include "vision/image.h"

namespace kiln {

// `points`: top-left, top-right, bottom-right, bottom-left in image pixels.
Expected<Image> CropTextBox(const Image& image, const std::array<std::array<float, 2>, 4>& points);

// The image turned by 180 degrees, and by 90 degrees counterclockwise.
Image Rotate180(const Image& image);
Image Rotate90CounterClockwise(const Image& image);

}  // namespace kiln
