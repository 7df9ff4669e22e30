// Image decoding and encoding: round trips through PNG (exact) and JPEG
// (lossy), alpha and grayscale PNGs, and broken files of every kind
// refused with a message.
#include <gtest/gtest.h>
#include <png.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "vision/image_file.h"

namespace kiln {
namespace image_file_tests {

Image Gradient(int w, int h) {
  Image img(w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = static_cast<uint8_t>((x + y) % 256);
    }
  return img;
}

std::vector<uint8_t> PngOf(int w, int h, uint32_t format, const std::vector<uint8_t>& pixels) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::vector<uint8_t> bytes(size);
  EXPECT_TRUE(png_image_write_to_memory(&png, bytes.data(), &size, 0, pixels.data(), 0, nullptr));
  bytes.resize(size);
  return bytes;
}

TEST(ImageFile, PngRoundTripIsExact) {
  const Image img = Gradient(37, 23);
  auto bytes = EncodePng(img);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeImage(bytes->data(), bytes->size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->width, 37);
  EXPECT_EQ(back->height, 23);
  EXPECT_EQ(back->rgb, img.rgb);
}

TEST(ImageFile, JpegRoundTripIsClose) {
  const Image img = Gradient(64, 48);
  auto bytes = EncodeJpeg(img, 95);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeImage(bytes->data(), bytes->size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->width, 64);
  ASSERT_EQ(back->height, 48);
  double total = 0;
  for (size_t i = 0; i < img.rgb.size(); ++i) total += std::abs(int(img.rgb[i]) - int(back->rgb[i]));
  EXPECT_LT(total / img.rgb.size(), 4.0);  // mean absolute error of a q95 JPEG of a smooth image
}

TEST(ImageFile, GrayAndAlphaPngsBecomeRgb) {
  auto gray = DecodeImage(PngOf(2, 1, PNG_FORMAT_GRAY, {10, 200}).data(), PngOf(2, 1, PNG_FORMAT_GRAY, {10, 200}).size());
  ASSERT_TRUE(gray.ok()) << gray.status().ToString();
  EXPECT_EQ(gray->rgb, (std::vector<uint8_t>{10, 10, 10, 200, 200, 200}));
  // An opaque red pixel and a fully transparent one (composited over white).
  const auto rgba = PngOf(2, 1, PNG_FORMAT_RGBA, {255, 0, 0, 255, 0, 0, 0, 0});
  auto img = DecodeImage(rgba.data(), rgba.size());
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->rgb, (std::vector<uint8_t>{255, 0, 0, 255, 255, 255}));
}

// (A PNG cut inside its final IEND chunk still holds every pixel and is
// accepted; a cut into the image data is not.)
TEST(ImageFile, TruncatedFilesAreErrors) {
  const Image img = Gradient(64, 64);
  for (bool jpeg : {false, true}) {
    auto bytes = jpeg ? EncodeJpeg(img) : EncodePng(img);
    ASSERT_TRUE(bytes.ok());
    for (size_t keep : {size_t{2}, size_t{12}, size_t{100}, bytes->size() / 2, bytes->size() - 20}) {
      auto r = DecodeImage(bytes->data(), keep);
      EXPECT_FALSE(r.ok()) << (jpeg ? "jpeg" : "png") << " cut to " << keep;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

TEST(ImageFile, CorruptAndForeignDataAreErrors) {
  const Image img = Gradient(32, 32);
  auto png = *EncodePng(img);
  png[40] ^= 0xff;  // inside the header chunk: its CRC no longer matches
  EXPECT_FALSE(DecodeImage(png.data(), png.size()).ok());
  auto jpeg = *EncodeJpeg(img);
  for (size_t i = 2; i < 200 && i < jpeg.size(); i += 3) jpeg[i] = static_cast<uint8_t>(i * 7);
  auto r = DecodeImage(jpeg.data(), jpeg.size());
  EXPECT_FALSE(r.ok());
  const std::string text = "hello, not an image";
  auto foreign = DecodeImage(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a JPEG or PNG"), std::string::npos);
  EXPECT_FALSE(DecodeImage(nullptr, 0).ok());
}

TEST(ImageFile, PixelLimitRefusesLargeImages) {
  const Image img = Gradient(100, 100);
  ImageDecodeLimits limits;
  limits.max_pixels = 5000;
  for (bool jpeg : {false, true}) {
    auto bytes = jpeg ? *EncodeJpeg(img) : *EncodePng(img);
    auto r = DecodeImage(bytes.data(), bytes.size(), limits);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("larger than the limit"), std::string::npos) << r.status().message();
  }
}

TEST(ImageFile, MissingFileNamesThePath) {
  auto r = ReadImageFile("/nonexistent/dir/picture.png");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("picture.png"), std::string::npos);
}

}  // namespace image_file_tests
}  // namespace kiln

namespace kiln {
namespace image_file_tests {

// An APP1 segment holding a little- or big-endian TIFF with one IFD entry:
// Orientation = `orientation`.
std::vector<uint8_t> ExifSegment(int orientation, bool little) {
  std::vector<uint8_t> tiff;
  auto put16 = [&](uint32_t v) {
    if (little) tiff.insert(tiff.end(), {uint8_t(v), uint8_t(v >> 8)});
    else tiff.insert(tiff.end(), {uint8_t(v >> 8), uint8_t(v)});
  };
  auto put32 = [&](uint32_t v) {
    if (little) put16(v & 0xffff), put16(v >> 16);
    else put16(v >> 16), put16(v & 0xffff);
  };
  tiff.push_back(little ? 'I' : 'M');
  tiff.push_back(little ? 'I' : 'M');
  put16(42);
  put32(8);
  put16(1);
  put16(0x0112), put16(3), put32(1), put16(orientation), put16(0);
  put32(0);
  std::vector<uint8_t> payload{'E', 'x', 'i', 'f', 0, 0};
  payload.insert(payload.end(), tiff.begin(), tiff.end());
  const size_t len = payload.size() + 2;
  std::vector<uint8_t> seg{0xff, 0xe1, uint8_t(len >> 8), uint8_t(len)};
  seg.insert(seg.end(), payload.begin(), payload.end());
  return seg;
}

TEST(ImageFile, JpegExifOrientationIsApplied) {
  // A 32x16 image, left half dark, right half bright.
  Image img(32, 16);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 32; ++x) std::fill_n(img.pixel(x, y), 3, x < 16 ? 20 : 230);
  const auto jpeg = *EncodeJpeg(img, 95);
  for (bool little : {true, false}) {
    // Orientation 6: turned clockwise for display, 16x32, the bright half below.
    std::vector<uint8_t> tagged(jpeg.begin(), jpeg.begin() + 2);
    const auto seg = ExifSegment(6, little);
    tagged.insert(tagged.end(), seg.begin(), seg.end());
    tagged.insert(tagged.end(), jpeg.begin() + 2, jpeg.end());
    auto r = DecodeImage(tagged.data(), tagged.size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->width, 16);
    ASSERT_EQ(r->height, 32);
    EXPECT_LT(r->pixel(8, 4)[0], 60);
    EXPECT_GT(r->pixel(8, 28)[0], 190);
  }
}

}  // namespace image_file_tests
}  // namespace kiln
