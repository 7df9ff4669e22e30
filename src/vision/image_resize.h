// Bilinear resizing with pixel centers aligned (a destination pixel x
// samples the source at (x + 0.5) * src_w / dst_w - 0.5, clamped to the
// edge), as OpenCV's INTER_LINEAR does: the preprocessing the detection and
// OCR models were trained with.
#pragma once

#include "vision/image.h"

namespace kiln {

// REQUIRES: !src.empty(), width > 0, height > 0.
Image ResizeBilinear(const Image& src, int width, int height);

}  // namespace kiln
