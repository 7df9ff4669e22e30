// Drawing results onto an image: lines, box outlines, polygons, and short
// labels (class and score) in a built-in 3x5 pixel font scaled up.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vision/image.h"

namespace kiln {

using Color = std::array<uint8_t, 3>;

// A distinct color for each small integer (a class index).
Color PaletteColor(int index);

// Every drawing clips to the image.
void DrawLine(Image* image, float x0, float y0, float x1, float y1, const Color& color, int thickness = 2);
void DrawRectangle(Image* image, const float box[4], const Color& color, int thickness = 2);
void DrawPolygon(Image* image, const std::vector<std::array<float, 2>>& points, const Color& color,
                 int thickness = 2);
// `text` of digits, '.', '-', ':' and spaces (other characters are drawn as
// a blank), white on a box of `background`, its top-left corner at (x, y).
void DrawLabel(Image* image, int x, int y, const std::string& text, const Color& background, int scale = 2);

}  // namespace kiln
