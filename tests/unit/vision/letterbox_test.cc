// Letterbox geometry against hand-computed cases (Ultralytics' rules), the
// tensor's layout and padding, and boxes mapped back.
#include <gtest/gtest.h>

#include "vision/image_resize.h"
#include "vision/letterbox.h"

namespace kiln {
namespace letterbox_tests {

TEST(Letterbox, WideImageIsPaddedTopAndBottom) {
  // 1280x720 into 640x640: r = 0.5, 640x360, 280 rows of padding split 140/140.
  const LetterboxGeometry g = ComputeLetterbox(1280, 720, 640, 640);
  EXPECT_FLOAT_EQ(g.scale, 0.5f);
  EXPECT_EQ(g.resized_width, 640);
  EXPECT_EQ(g.resized_height, 360);
  EXPECT_EQ(g.pad_left, 0);
  EXPECT_EQ(g.pad_top, 140);
}

TEST(Letterbox, SmallImageIsScaledUpAndOddPaddingGoesBelow) {
  // 100x51 into 64x64: r = min(64/51, 0.64) = 0.64; 64 x round(32.64) = 33;
  // 31 rows of padding: top round(15.5 - 0.1) = 15, bottom 16.
  const LetterboxGeometry g = ComputeLetterbox(100, 51, 64, 64);
  EXPECT_FLOAT_EQ(g.scale, 0.64f);
  EXPECT_EQ(g.resized_width, 64);
  EXPECT_EQ(g.resized_height, 33);
  EXPECT_EQ(g.pad_top, 15);
  EXPECT_EQ(g.pad_left, 0);
  // 20x40 into 64x64: r = 1.6, 32x64, left 16.
  const LetterboxGeometry t = ComputeLetterbox(20, 40, 64, 64);
  EXPECT_EQ(t.resized_width, 32);
  EXPECT_EQ(t.resized_height, 64);
  EXPECT_EQ(t.pad_left, 16);
  EXPECT_EQ(t.pad_top, 0);
}

TEST(Letterbox, TensorIsRgbNchwScaledWithPadding114) {
  Image img(8, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 8; ++x) {
      img.pixel(x, y)[0] = 255;
      img.pixel(x, y)[1] = 51;
      img.pixel(x, y)[2] = 0;
    }
  const LetterboxGeometry g = ComputeLetterbox(8, 4, 16, 16);  // r = 2: 16x8, pad top 4
  ASSERT_EQ(g.pad_top, 4);
  HostTensor t = LetterboxTensor(img, g);
  ASSERT_EQ(t.type.dims, (std::vector<int64_t>{1, 3, 16, 16}));
  const float* d = t.data<float>();
  auto at = [&](int c, int y, int x) { return d[(c * 16 + y) * 16 + x]; };
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(at(c, 0, 0), 114 / 255.0f);   // padding above
    EXPECT_FLOAT_EQ(at(c, 15, 9), 114 / 255.0f);  // padding below
  }
  EXPECT_FLOAT_EQ(at(0, 8, 5), 1.0f);  // R
  EXPECT_FLOAT_EQ(at(1, 8, 5), 0.2f);  // G
  EXPECT_FLOAT_EQ(at(2, 8, 5), 0.0f);  // B
}

TEST(Letterbox, BoxesMapBackAndClip) {
  const LetterboxGeometry g = ComputeLetterbox(1280, 720, 640, 640);
  float box[4] = {100, 150, 300, 640};
  MapBoxToSource(g, box);
  EXPECT_FLOAT_EQ(box[0], 200);
  EXPECT_FLOAT_EQ(box[1], 20);
  EXPECT_FLOAT_EQ(box[2], 600);
  EXPECT_FLOAT_EQ(box[3], 720);  // 1000 clipped to the height
}

TEST(ResizeBilinear, MatchesHalfPixelCenters) {
  // 2x1 -> 4x1: destination centers sample at -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
  Image img(2, 1);
  img.pixel(0, 0)[0] = 0;
  img.pixel(1, 0)[0] = 200;
  const Image out = ResizeBilinear(img, 4, 1);
  EXPECT_EQ(out.pixel(0, 0)[0], 0);
  EXPECT_EQ(out.pixel(1, 0)[0], 50);
  EXPECT_EQ(out.pixel(2, 0)[0], 150);
  EXPECT_EQ(out.pixel(3, 0)[0], 200);
}

}  // namespace letterbox_tests
}  // namespace kiln
