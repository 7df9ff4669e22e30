// Drawing: outlines land on the box's edges, labels stay inside the image,
// and boxes far outside the image (or NaN) draw nothing out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "vision/draw.h"

namespace kiln {
namespace draw_tests {

bool Is(const Image& img, int x, int y, const Color& c) {
  const uint8_t* p = img.pixel(x, y);
  return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
}

TEST(Draw, RectangleOutline) {
  Image img(40, 30);
  const Color red{255, 0, 0};
  const float box[4] = {5, 5, 20, 15};
  DrawRectangle(&img, box, red, 1);
  EXPECT_TRUE(Is(img, 5, 5, red));
  EXPECT_TRUE(Is(img, 12, 5, red));
  EXPECT_TRUE(Is(img, 20, 10, red));
  EXPECT_TRUE(Is(img, 12, 15, red));
  EXPECT_FALSE(Is(img, 12, 10, red));  // inside stays
  EXPECT_FALSE(Is(img, 25, 10, red));  // outside stays
}

TEST(Draw, LabelDigitsAndClipping) {
  Image img(30, 20);
  const Color blue{0, 0, 255};
  DrawLabel(&img, 100, 100, "1 0.50", blue, 1);  // pushed back inside
  int background = 0, ink = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 30; ++x) {
      background += Is(img, x, y, blue);
      ink += Is(img, x, y, Color{255, 255, 255});
    }
  EXPECT_GT(background, 0);
  EXPECT_GT(ink, 5);
}

TEST(Draw, FarAwayAndNaNBoxesAreHarmless) {
  Image img(16, 16);
  const float huge[4] = {-1e30f, -1e30f, 1e30f, 1e30f};
  DrawRectangle(&img, huge, Color{1, 2, 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float bad[4] = {nan, nan, nan, nan};
  DrawRectangle(&img, bad, Color{1, 2, 3});
  // The huge box's edges are all outside; the NaN box is skipped.
  for (uint8_t v : img.rgb) ASSERT_EQ(v, 0);
  DrawPolygon(&img, {{-50, -50}, {100, 8}, {8, 8}}, Color{4, 5, 6}, 5);
  EXPECT_TRUE(Is(img, 12, 8, Color{4, 5, 6}));
  int drawn = 0;
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) drawn += Is(img, x, y, Color{4, 5, 6});
  EXPECT_GT(drawn, 0);  // the edges crossing the image are drawn
}

TEST(Draw, PaletteWrapsAndTakesNegatives) {
  EXPECT_EQ(PaletteColor(0), PaletteColor(20));
  EXPECT_EQ(PaletteColor(-1), PaletteColor(19));
}

}  // namespace draw_tests
}  // namespace kiln
