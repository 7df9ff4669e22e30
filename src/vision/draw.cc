#include "vision/draw.h"

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

void Put(Image* image, int x, int y, const Color& color) {
  if (x < 0 || y < 0 || x >= image->width || y >= image->height) return;
  uint8_t* p = image->pixel(x, y);
  p[0] = color[0];
  p[1] = color[1];
  p[2] = color[2];
}

void FillRect(Image* image, int x0, int y0, int x1, int y1, const Color& color) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, image->width);
  y1 = std::min(y1, image->height);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) Put(image, x, y, color);
}

// 3x5 glyphs, one row per entry, bit 2 the leftmost column.
struct Glyph {
  char c;
  uint8_t rows[5];
};
constexpr Glyph kGlyphs[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}},
    {':', {0, 2, 0, 2, 0}},
};

const Glyph* FindGlyph(char c) {
  for (const Glyph& g : kGlyphs)
    if (g.c == c) return &g;
  return nullptr;
}

}  // namespace

Color PaletteColor(int index) {
  static constexpr Color kPalette[] = {{255, 56, 56},  {255, 157, 151}, {255, 112, 31}, {255, 178, 29},
                                       {207, 210, 49}, {72, 249, 10},   {146, 204, 23}, {61, 219, 134},
                                       {26, 147, 52},  {0, 212, 187},   {44, 153, 168}, {0, 194, 255},
                                       {52, 69, 147},  {100, 115, 255}, {0, 24, 236},   {132, 56, 255},
                                       {82, 0, 133},   {203, 56, 255},  {255, 149, 200}, {255, 55, 199}};
  constexpr int n = sizeof(kPalette) / sizeof(kPalette[0]);
  return kPalette[((index % n) + n) % n];
}

void DrawLine(Image* image, float x0, float y0, float x1, float y1, const Color& color, int thickness) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  // Clamp far-away endpoints so that the step count stays bounded.
  const float limit = 4.0f * std::max(image->width, image->height) + 16;
  x0 = std::clamp(x0, -limit, limit);
  x1 = std::clamp(x1, -limit, limit);
  y0 = std::clamp(y0, -limit, limit);
  y1 = std::clamp(y1, -limit, limit);
  const int steps = static_cast<int>(std::ceil(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0)))) + 1;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  for (int i = 0; i <= steps; ++i) {
    const float t = static_cast<float>(i) / steps;
    const int x = static_cast<int>(std::lround(x0 + (x1 - x0) * t));
    const int y = static_cast<int>(std::lround(y0 + (y1 - y0) * t));
    for (int dy = lo; dy <= hi; ++dy)
      for (int dx = lo; dx <= hi; ++dx) Put(image, x + dx, y + dy, color);
  }
}

void DrawRectangle(Image* image, const float box[4], const Color& color, int thickness) {
  DrawPolygon(image, {{box[0], box[1]}, {box[2], box[1]}, {box[2], box[3]}, {box[0], box[3]}}, color, thickness);
}

void DrawPolygon(Image* image, const std::vector<std::array<float, 2>>& points, const Color& color,
                 int thickness) {
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& a = points[i];
    const auto& b = points[(i + 1) % points.size()];
    DrawLine(image, a[0], a[1], b[0], b[1], color, thickness);
  }
}

void DrawLabel(Image* image, int x, int y, const std::string& text, const Color& background, int scale) {
  const int advance = 4 * scale;
  const int width = static_cast<int>(text.size()) * advance + scale, height = 7 * scale;
  // Keep the label inside the image where it fits.
  x = std::clamp(x, 0, std::max(0, image->width - width));
  y = std::clamp(y, 0, std::max(0, image->height - height));
  FillRect(image, x, y, x + width, y + height, background);
  const Color white{255, 255, 255};
  for (size_t i = 0; i < text.size(); ++i) {
    const Glyph* g = FindGlyph(text[i]);
    if (!g) continue;
    const int gx = x + scale + static_cast<int>(i) * advance, gy = y + scale;
    for (int row = 0; row < 5; ++row)
      for (int col = 0; col < 3; ++col)
        if (g->rows[row] & (4 >> col)) FillRect(image, gx + col * scale, gy + row * scale, gx + (col + 1) * scale,
                                                 gy + (row + 1) * scale, white);
  }
}

}  // namespace kiln
