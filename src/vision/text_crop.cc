#include "vision/text_crop.h"

#include <algorithm>
#include <cmath>

namespace kiln {
namespace {

// Solves the 8 unknowns of the homography H (h33 = 1) with H * src_i ~ dst_i
// for four point pairs, by Gaussian elimination with partial pivoting.
bool SolveHomography(const double src[4][2], const double dst[4][2], double h[9]) {
  double a[8][9] = {};
  for (int i = 0; i < 4; ++i) {
    const double x = src[i][0], y = src[i][1], u = dst[i][0], v = dst[i][1];
    double* r0 = a[2 * i];
    double* r1 = a[2 * i + 1];
    r0[0] = x, r0[1] = y, r0[2] = 1, r0[6] = -u * x, r0[7] = -u * y, r0[8] = u;
    r1[3] = x, r1[4] = y, r1[5] = 1, r1[6] = -v * x, r1[7] = -v * y, r1[8] = v;
  }
  for (int col = 0; col < 8; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 8; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    if (std::fabs(a[pivot][col]) < 1e-12) return false;
    for (int c = 0; c < 9; ++c) std::swap(a[col][c], a[pivot][c]);
    for (int r = 0; r < 8; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < 9; ++c) a[r][c] -= f * a[col][c];
    }
  }
  for (int i = 0; i < 8; ++i) h[i] = a[i][8] / a[i][i];
  h[8] = 1;
  return true;
}

// OpenCV's bicubic weights (A = -0.75) for a fractional offset t.
void CubicWeights(double t, double w[4]) {
  constexpr double A = -0.75;
  w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  w[3] = 1 - w[0] - w[1] - w[2];
}

// Bicubic sampling with the image's edge pixels repeated outside it.
void SampleBicubic(const Image& image, double x, double y, uint8_t out[3]) {
  // Far outside, every tap is an edge pixel anyway.
  x = std::clamp(x, -2.0, image.width + 1.0);
  y = std::clamp(y, -2.0, image.height + 1.0);
  const int x0 = static_cast<int>(std::floor(x)), y0 = static_cast<int>(std::floor(y));
  double wx[4], wy[4];
  CubicWeights(x - x0, wx);
  CubicWeights(y - y0, wy);
  double acc[3] = {0, 0, 0};
  for (int j = 0; j < 4; ++j) {
    const int sy = std::clamp(y0 - 1 + j, 0, image.height - 1);
    for (int i = 0; i < 4; ++i) {
      const int sx = std::clamp(x0 - 1 + i, 0, image.width - 1);
      const uint8_t* p = image.pixel(sx, sy);
      const double w = wx[i] * wy[j];
      for (int c = 0; c < 3; ++c) acc[c] += w * p[c];
    }
  }
  for (int c = 0; c < 3; ++c) out[c] = static_cast<uint8_t>(std::clamp(std::lround(acc[c]), 0L, 255L));
}

}  // namespace

Expected<Image> CropTextBox(const Image& image, const std::array<std::array<float, 2>, 4>& points) {
  auto dist = [&](int a, int b) {
    return std::hypot(static_cast<double>(points[a][0]) - points[b][0], static_cast<double>(points[a][1]) - points[b][1]);
  };
  const int width = static_cast<int>(std::max(dist(0, 1), dist(2, 3)));
  const int height = static_cast<int>(std::max(dist(0, 3), dist(1, 2)));
  if (width < 1 || height < 1) return InvalidArgument("text box of {}x{} pixels is empty", width, height);
  if (static_cast<int64_t>(width) * height > int64_t{1} << 26) {
    return InvalidArgument("text box of {}x{} pixels is too large", width, height);
  }
  // The map from crop pixels to image pixels (the inverse of OpenCV's M).
  const double crop[4][2] = {{0, 0}, {static_cast<double>(width), 0},
                             {static_cast<double>(width), static_cast<double>(height)},
                             {0, static_cast<double>(height)}};
  double quad[4][2];
  for (int i = 0; i < 4; ++i) quad[i][0] = points[i][0], quad[i][1] = points[i][1];
  double h[9];
  if (!SolveHomography(crop, quad, h)) return InvalidArgument("text box corners are degenerate (collinear)");
  Image out(width, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double w = h[6] * x + h[7] * y + h[8];
      if (std::fabs(w) < 1e-12) continue;
      const double sx = (h[0] * x + h[1] * y + h[2]) / w, sy = (h[3] * x + h[4] * y + h[5]) / w;
      SampleBicubic(image, sx, sy, out.pixel(x, y));
    }
  }
  if (height >= 1.5 * width) return Rotate90CounterClockwise(out);
  return out;
}

Image Rotate180(const Image& image) {
  Image out(image.width, image.height);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x)
      std::copy_n(image.pixel(x, y), 3, out.pixel(image.width - 1 - x, image.height - 1 - y));
  return out;
}

Image Rotate90CounterClockwise(const Image& image) {
  // The source's last column becomes the first row.
  Image out(image.height, image.width);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) std::copy_n(image.pixel(x, y), 3, out.pixel(y, image.width - 1 - x));
  return out;
}

}  // namespace kiln
