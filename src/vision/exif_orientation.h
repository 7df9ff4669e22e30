// The EXIF orientation tag of camera JPEGs: phones store the sensor's
// pixels and a tag saying how to turn them for display. Images are decoded
// as displayed (as OpenCV's imread does), so that boxes are in the pixels a
// viewer sees.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vision/image.h"

namespace kiln {

// The orientation (1..8) in an APP1 segment's payload ("Exif\0\0" and a
// TIFF structure); 1 when there is none or it is malformed.
int ExifOrientation(const uint8_t* app1, size_t size);

// The image as displayed for an orientation 1..8 (others: unchanged).
Image ApplyExifOrientation(const Image& image, int orientation);

}  // namespace kiln
