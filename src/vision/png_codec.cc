// PNG through libpng's simplified API (png_image), which converts every
// bit depth and color type to 8-bit RGB and reports errors in the
// png_image's message instead of aborting.
#include <png.h>

#include <cstring>
#include <string>

#include "vision/image_file.h"

namespace kiln {

Expected<Image> DecodePng(const uint8_t* data, size_t size, const ImageDecodeLimits& limits) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data, size)) {
    std::string message = png.message;
    png_image_free(&png);
    return Corrupt("not a readable PNG image: {}", message);
  }
  if (static_cast<int64_t>(png.width) * png.height > limits.max_pixels) {
    png_image_free(&png);
    return Corrupt("PNG image of {}x{} pixels is larger than the limit of {} pixels", png.width, png.height,
                   limits.max_pixels);
  }
  png.format = PNG_FORMAT_RGB;
  Image image(static_cast<int>(png.width), static_cast<int>(png.height));
  // Transparent pixels become white (a text image's usual background).
  png_color white{255, 255, 255};
  if (!png_image_finish_read(&png, &white, image.rgb.data(), 0, nullptr)) {
    std::string message = png.message;
    png_image_free(&png);
    return Corrupt("PNG data is truncated or corrupt: {}", message);
  }
  png_image_free(&png);
  return image;
}

Expected<std::vector<uint8_t>> EncodePng(const Image& image) {
  if (image.empty()) return InvalidArgument("cannot encode an empty image as PNG");
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.rgb.data(), 0, nullptr)) {
    return Internal("PNG encoding failed: {}", png.message);
  }
  std::vector<uint8_t> bytes(size);
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, image.rgb.data(), 0, nullptr)) {
    return Internal("PNG encoding failed: {}", png.message);
  }
  bytes.resize(size);
  return bytes;
}

}  // namespace kiln
