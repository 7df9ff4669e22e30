// DB post-processing on synthetic probability maps: an axis-aligned
// rectangle (every step computed by hand), a rotated one, regions too thin
// or too faint to keep, and reading order.
#include <gtest/gtest.h>

#include <cmath>

#include "vision/db_postprocess.h"
#include "vision/rotated_rect.h"

namespace kiln {
namespace db_postprocess_tests {

TEST(DbPostprocess, AxisAlignedRectangle) {
  // Pixels x 20..59, y 10..29 at 0.9 on a 100x50 map of zeros.
  const int w = 100, h = 50;
  std::vector<float> prob(w * h, 0.0f);
  for (int y = 10; y < 30; ++y)
    for (int x = 20; x < 60; ++x) prob[y * w + x] = 0.9f;
  auto boxes = DbPostprocess(prob.data(), w, h, w, h);
  ASSERT_TRUE(boxes.ok()) << boxes.status().ToString();
  ASSERT_EQ(boxes->size(), 1u);
  const TextBox& b = (*boxes)[0];
  EXPECT_NEAR(b.score, 0.9f, 1e-6);
  // The pixel-center rectangle is 39 x 19 about (39.5, 19.5); unclip
  // d = 39 * 19 * 1.5 / (2 * (39 + 19)) = 9.582; corners at 39.5 -+ 29.08
  // and 19.5 -+ 19.08, rounded: x 10 and 69, y 0 and 39.
  const float expected[4][2] = {{10, 0}, {69, 0}, {69, 39}, {10, 39}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(b.points[i][0], expected[i][0]) << "corner " << i;
    EXPECT_FLOAT_EQ(b.points[i][1], expected[i][1]) << "corner " << i;
  }
}

TEST(DbPostprocess, MapScaledToImage) {
  // The same region on a map of half the image's size: corners doubled.
  const int w = 100, h = 50;
  std::vector<float> prob(w * h, 0.0f);
  for (int y = 10; y < 30; ++y)
    for (int x = 20; x < 60; ++x) prob[y * w + x] = 0.9f;
  auto boxes = DbPostprocess(prob.data(), w, h, 2 * w, 2 * h);
  ASSERT_TRUE(boxes.ok());
  ASSERT_EQ(boxes->size(), 1u);
  EXPECT_FLOAT_EQ((*boxes)[0].points[0][0], 21);  // round(10.42 * 2)
  EXPECT_FLOAT_EQ((*boxes)[0].points[2][0], 137);  // round(68.58 * 2)
  EXPECT_FLOAT_EQ((*boxes)[0].points[2][1], 77);   // round(38.58 * 2)
}

TEST(DbPostprocess, RotatedRectangle) {
  // A 90 x 24 rectangle rotated by 30 degrees about (100, 80): pixels whose
  // centers fall inside.
  const int w = 200, h = 160;
  const double angle = 30 * M_PI / 180, c = std::cos(angle), s = std::sin(angle);
  std::vector<float> prob(w * h, 0.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double u = (x - 100) * c + (y - 80) * s, v = -(x - 100) * s + (y - 80) * c;
      if (std::fabs(u) <= 45 && std::fabs(v) <= 12) prob[y * w + x] = 0.8f;
    }
  auto boxes = DbPostprocess(prob.data(), w, h, w, h);
  ASSERT_TRUE(boxes.ok());
  ASSERT_EQ(boxes->size(), 1u);
  const TextBox& b = (*boxes)[0];
  EXPECT_NEAR(b.score, 0.8f, 0.02f);
  // Unclip grows 90 x 24 by d = 90 * 24 * 1.5 / 228 = 14.2 per side (the
  // pixelized region is about a pixel smaller): about 118.4 x 52.4.
  auto len = [&](int i, int j) {
    return std::hypot(b.points[i][0] - b.points[j][0], b.points[i][1] - b.points[j][1]);
  };
  EXPECT_NEAR(len(0, 1), 118.4, 3);
  EXPECT_NEAR(len(1, 2), 52.4, 3);
  const double top_angle = std::atan2(b.points[1][1] - b.points[0][1], b.points[1][0] - b.points[0][0]) * 180 / M_PI;
  EXPECT_NEAR(top_angle, 30, 1.5);
  double cx = 0, cy = 0;
  for (const auto& p : b.points) cx += p[0] / 4, cy += p[1] / 4;
  EXPECT_NEAR(cx, 100, 1);
  EXPECT_NEAR(cy, 80, 1);
}

TEST(DbPostprocess, ThinFaintAndEmptyRegionsAreDropped) {
  const int w = 60, h = 40;
  std::vector<float> prob(w * h, 0.0f);
  for (int x = 5; x < 50; ++x) prob[5 * w + x] = prob[6 * w + x] = 0.95f;  // 2 rows: shorter side 1
  for (int y = 15; y < 35; ++y)
    for (int x = 5; x < 50; ++x) prob[y * w + x] = 0.5f;  // above 0.3 but scores 0.5 < 0.6
  auto boxes = DbPostprocess(prob.data(), w, h, w, h);
  ASSERT_TRUE(boxes.ok());
  EXPECT_TRUE(boxes->empty());
  std::vector<float> zeros(w * h, 0.0f);
  EXPECT_TRUE(DbPostprocess(zeros.data(), w, h, w, h)->empty());
  EXPECT_FALSE(DbPostprocess(zeros.data(), 0, h, w, h).ok());
}

TEST(DbPostprocess, BoxScoreIncludesBoundary) {
  // A 3x3 map, box over the middle pixel only and over the whole map.
  const std::vector<float> prob{0, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_FLOAT_EQ(BoxScore(prob.data(), 3, 3, {{{1, 1}, {1, 1}, {1, 1}, {1, 1}}}), 1.0f);
  EXPECT_FLOAT_EQ(BoxScore(prob.data(), 3, 3, {{{0, 0}, {2, 0}, {2, 2}, {0, 2}}}), 1.0f / 9);
}

TEST(SortTextBoxes, TopToBottomThenLeftToRightWithinTenPixels) {
  auto box = [](float x, float y) {
    TextBox b;
    b.points = {{{x, y}, {x + 10, y}, {x + 10, y + 5}, {x, y + 5}}};
    return b;
  };
  // Line 1 at y 100 and 104 (same line), line 2 at y 50.
  std::vector<TextBox> boxes{box(200, 100), box(10, 104), box(30, 50)};
  SortTextBoxes(&boxes);
  EXPECT_FLOAT_EQ(boxes[0].points[0][0], 30);
  EXPECT_FLOAT_EQ(boxes[1].points[0][0], 10);
  EXPECT_FLOAT_EQ(boxes[2].points[0][0], 200);
}

TEST(MinAreaRect, OfARotatedSquareAndACollinearSet) {
  // A diamond of side sqrt(2) * 10.
  const RotatedRect r = MinAreaRect({{0, 10}, {10, 0}, {20, 10}, {10, 20}});
  EXPECT_NEAR(r.width * r.height, 200, 1e-9);
  const RotatedRect line = MinAreaRect({{0, 0}, {5, 5}, {10, 10}});
  EXPECT_NEAR(std::max(line.width, line.height), std::hypot(10, 10), 1e-9);
  EXPECT_NEAR(std::min(line.width, line.height), 0, 1e-9);
}

}  // namespace db_postprocess_tests
}  // namespace kiln
