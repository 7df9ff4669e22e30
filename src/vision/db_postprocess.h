// The text detector's probability map turned into text boxes, as PaddleOCR's
// DBPostProcess (with its defaults) and the detector's box filter do:
//   1. the bitmap: probability > 0.3;
//   2. its 8-connected regions (the first 1000 in raster order of their
//      first pixel), each region's outline as pixel-center points;
//   3. the region's minimum-area rotated rectangle; dropped if its shorter
//      side is under 3 pixels;
//   4. the box score: the mean probability over the map pixels inside the
//      rectangle (corners truncated to integers, boundary included);
//      dropped under 0.6;
//   5. unclip: the rectangle offset outward by d = area * 1.5 / perimeter
//      (the polygon offset with round joins, whose minimum-area rectangle is
//      the rectangle grown by d on every side); dropped if its shorter side
//      is under 3 + 2;
//   6. corners scaled from map to image pixels (rounded, clipped to
//      [0, width] x [0, height]), ordered top-left, top-right,
//      bottom-right, bottom-left, then clipped to [0, width - 1] x
//      [0, height - 1]; dropped if the (integer) length of the top or left
//      edge is 3 or less.
#pragma once

#include <array>
#include <vector>

#include "core/status.h"

namespace kiln {

struct DbOptions {
  float bitmap_threshold = 0.3f;
  float box_threshold = 0.6f;
  float unclip_ratio = 1.5f;
  int max_candidates = 1000;
  int min_size = 3;
};

struct TextBox {
  std::array<std::array<float, 2>, 4> points;  // top-left, top-right, bottom-right, bottom-left
  float score = 0;                             // mean probability inside
};

// `prob` is the map_height x map_width probability map of an image of
// image_width x image_height pixels.
Expected<std::vector<TextBox>> DbPostprocess(const float* prob, int map_width, int map_height, int image_width,
                                             int image_height, const DbOptions& options = {});

// The mean of `prob` over the pixels inside the quadrilateral (map
// coordinates), 0 if none is.
float BoxScore(const float* prob, int map_width, int map_height, const std::array<std::array<double, 2>, 4>& box);

// Reading order as PaddleOCR's sorted_boxes: by the top-left corner's y,
// then x; then boxes whose top-left y differ by under 10 pixels are put
// left to right.
void SortTextBoxes(std::vector<TextBox>* boxes);

}  // namespace kiln
