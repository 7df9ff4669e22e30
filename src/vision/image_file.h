// Reading JPEG and PNG files into RGB images, and writing PNG files. A file
// that is not an image, is truncated or is corrupt is an error that says so,
// never a crash (libjpeg's and libpng's error handlers return here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "vision/image.h"

namespace kiln {

struct ImageDecodeLimits {
  // Images with more pixels are refused before their data is decoded
  // (the default allows about 8K x 8K; the fuzz target sets less).
  int64_t max_pixels = int64_t{1} << 26;
};

// Decodes JPEG (baseline, progressive; grayscale, YCbCr, CMYK; turned as
// its EXIF orientation says) or PNG (any bit depth and color type; alpha is
// composited over white) by the file's signature.
Expected<Image> DecodeImage(const uint8_t* data, size_t size, const ImageDecodeLimits& limits = {});
Expected<Image> DecodeJpeg(const uint8_t* data, size_t size, const ImageDecodeLimits& limits = {});
Expected<Image> DecodePng(const uint8_t* data, size_t size, const ImageDecodeLimits& limits = {});

// Reads and decodes a file; errors name the path.
Expected<Image> ReadImageFile(const std::string& path, const ImageDecodeLimits& limits = {});

// The bytes of a PNG file of `image` (8-bit RGB).
Expected<std::vector<uint8_t>> EncodePng(const Image& image);
Status WritePngFile(const Image& image, const std::string& path);

// The bytes of a baseline JPEG file (for tests and fixtures).
Expected<std::vector<uint8_t>> EncodeJpeg(const Image& image, int quality = 90);

}  // namespace kiln
