// Cutting text boxes out: an axis-aligned box gives the same pixels, a
// tall one is turned to read as a line, a rotated one is straightened.
#include <gtest/gtest.h>

#include <cmath>

#include "vision/ocr_preprocess.h"
#include "vision/text_crop.h"

namespace kiln {
namespace text_crop_tests {

Image Pattern(int w, int h) {
  Image img(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      img.pixel(x, y)[0] = static_cast<uint8_t>(x * 3);
      img.pixel(x, y)[1] = static_cast<uint8_t>(y * 5);
      img.pixel(x, y)[2] = 7;
    }
  return img;
}

TEST(CropTextBox, AxisAlignedBoxCopiesPixels) {
  const Image img = Pattern(60, 40);
  auto crop = CropTextBox(img, {{{10, 5}, {30, 5}, {30, 15}, {10, 15}}});
  ASSERT_TRUE(crop.ok()) << crop.status().ToString();
  ASSERT_EQ(crop->width, 20);
  ASSERT_EQ(crop->height, 10);
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 20; ++x) {
      EXPECT_EQ(crop->pixel(x, y)[0], img.pixel(10 + x, 5 + y)[0]);
      EXPECT_EQ(crop->pixel(x, y)[1], img.pixel(10 + x, 5 + y)[1]);
    }
}

TEST(CropTextBox, TallBoxIsTurnedCounterClockwise) {
  const Image img = Pattern(60, 40);
  auto crop = CropTextBox(img, {{{10, 5}, {20, 5}, {20, 35}, {10, 35}}});  // 10 x 30
  ASSERT_TRUE(crop.ok());
  ASSERT_EQ(crop->width, 30);
  ASSERT_EQ(crop->height, 10);
  // The box's top-right pixel (19, 5) ends at the turned crop's top-left.
  EXPECT_EQ(crop->pixel(0, 0)[0], img.pixel(19, 5)[0]);
  EXPECT_EQ(crop->pixel(0, 0)[1], img.pixel(19, 5)[1]);
  // Its top-left (10, 5) at the bottom-left.
  EXPECT_EQ(crop->pixel(0, 9)[0], img.pixel(10, 5)[0]);
}

TEST(CropTextBox, RotatedBoxIsStraightened) {
  // A 40 x 10 box rotated by 90 degrees clockwise... as a quadrilateral
  // whose "top" edge goes down the image: reading it straightens it.
  const Image img = Pattern(60, 60);
  auto crop = CropTextBox(img, {{{30, 10}, {30, 50}, {20, 50}, {20, 10}}});
  ASSERT_TRUE(crop.ok());
  ASSERT_EQ(crop->width, 40);
  ASSERT_EQ(crop->height, 10);
  // Along the crop's x the source's y grows: green (y * 5) increases.
  EXPECT_LT(crop->pixel(2, 5)[1], crop->pixel(30, 5)[1]);
}

TEST(CropTextBox, DegenerateBoxesAreErrors) {
  const Image img = Pattern(10, 10);
  EXPECT_FALSE(CropTextBox(img, {{{1, 1}, {1, 1}, {1, 1}, {1, 1}}}).ok());
}

TEST(Rotate, HalfTurnAndQuarterTurn) {
  const Image img = Pattern(3, 2);
  const Image half = Rotate180(img);
  EXPECT_EQ(half.pixel(0, 0)[0], img.pixel(2, 1)[0]);
  const Image quarter = Rotate90CounterClockwise(img);
  ASSERT_EQ(quarter.width, 2);
  ASSERT_EQ(quarter.height, 3);
  EXPECT_EQ(quarter.pixel(0, 0)[0], img.pixel(2, 0)[0]);
  EXPECT_EQ(quarter.pixel(1, 2)[1], img.pixel(0, 1)[1]);
}

TEST(OcrPreprocess, DetectionSizesAreMultiplesOf32AndCapped) {
  DetInput small = MakeDetInput(Pattern(100, 30));
  EXPECT_EQ(small.width, 96);   // round(100 / 32) = 3
  EXPECT_EQ(small.height, 32);  // at least 32
  DetInput big = MakeDetInput(Pattern(1920, 1080));
  EXPECT_EQ(big.width, 960);   // scaled by 0.5
  EXPECT_EQ(big.height, 544);  // 540 -> round(16.875) * 32
  EXPECT_EQ(big.tensor.type.dims, (std::vector<int64_t>{1, 3, 544, 960}));
  // Channel 0 is blue (7) normalized with mean 0.485, std 0.229.
  EXPECT_NEAR(small.tensor.data<float>()[0], (7 / 255.0f - 0.485f) / 0.229f, 1e-5);
}

TEST(OcrPreprocess, RecognitionBucketsAndPadding) {
  EXPECT_EQ(RecBucketWidth(100, 48, 3200), 320);
  EXPECT_EQ(RecBucketWidth(320, 48, 3200), 320);
  EXPECT_EQ(RecBucketWidth(321, 48, 3200), 640);
  EXPECT_EQ(RecBucketWidth(400, 20, 3200), 960);  // 48 * 20 = 960
  EXPECT_EQ(RecBucketWidth(10000, 10, 3200), 3200);
  const HostTensor t = MakeRecInput(Pattern(96, 48));
  ASSERT_EQ(t.type.dims, (std::vector<int64_t>{1, 3, 48, 320}));
  const float* d = t.data<float>();
  EXPECT_NEAR(d[0], (7 / 255.0f - 0.5f) / 0.5f, 1e-6);  // B first
  EXPECT_EQ(d[200], 0.0f);                              // padding right of x = 96
  const HostTensor cls = MakeClsInput(Pattern(500, 48));
  EXPECT_EQ(cls.type.dims, (std::vector<int64_t>{1, 3, 48, 192}));
}

}  // namespace text_crop_tests
}  // namespace kiln
