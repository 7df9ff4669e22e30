// Each EXIF orientation turns a 3x2 image as the standard says: the pixel
// the viewer sees at the top-left.
#include <gtest/gtest.h>

#include "vision/exif_orientation.h"

namespace kiln {
namespace exif_orientation_tests {

TEST(ExifOrientation, AllEightOrientations) {
  // Pixels numbered 0..5 row by row: 0 1 2 / 3 4 5.
  Image img(3, 2);
  for (int i = 0; i < 6; ++i) img.pixel(i % 3, i / 3)[0] = static_cast<uint8_t>(i);
  struct Case {
    int orientation, width, height;
    std::vector<int> order;  // displayed pixels, row by row
  };
  const Case cases[] = {
      {1, 3, 2, {0, 1, 2, 3, 4, 5}}, {2, 3, 2, {2, 1, 0, 5, 4, 3}}, {3, 3, 2, {5, 4, 3, 2, 1, 0}},
      {4, 3, 2, {3, 4, 5, 0, 1, 2}}, {5, 2, 3, {0, 3, 1, 4, 2, 5}}, {6, 2, 3, {3, 0, 4, 1, 5, 2}},
      {7, 2, 3, {5, 2, 4, 1, 3, 0}}, {8, 2, 3, {2, 5, 1, 4, 0, 3}},
  };
  for (const Case& c : cases) {
    const Image out = ApplyExifOrientation(img, c.orientation);
    ASSERT_EQ(out.width, c.width) << c.orientation;
    ASSERT_EQ(out.height, c.height) << c.orientation;
    std::vector<int> got;
    for (int y = 0; y < out.height; ++y)
      for (int x = 0; x < out.width; ++x) got.push_back(out.pixel(x, y)[0]);
    EXPECT_EQ(got, c.order) << "orientation " << c.orientation;
  }
}

TEST(ExifOrientation, MalformedPayloadsMeanNoTurn) {
  const uint8_t not_exif[] = "JFIF\0\0\0\0\0\0\0\0\0\0";
  EXPECT_EQ(ExifOrientation(not_exif, sizeof(not_exif)), 1);
  // "Exif" and a TIFF header whose IFD offset points past the end.
  const uint8_t bad_offset[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 0xff, 0, 0, 0};
  EXPECT_EQ(ExifOrientation(bad_offset, sizeof(bad_offset)), 1);
  // An IFD that claims more entries than there are bytes.
  const uint8_t short_ifd[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 9, 0};
  EXPECT_EQ(ExifOrientation(short_ifd, sizeof(short_ifd)), 1);
}

}  // namespace exif_orientation_tests
}  // namespace kiln
