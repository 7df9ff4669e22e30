// Plane geometry for text boxes: the convex hull of points and the
// smallest-area rectangle enclosing them (any rotation), as OpenCV's
// convexHull and minAreaRect compute them.
#pragma once

#include <array>
#include <vector>

namespace kiln {

using PointF = std::array<double, 2>;

// The hull's vertices counterclockwise (in x-right, y-up terms), without
// repeated or collinear points. Fewer than 3 for degenerate input.
std::vector<PointF> ConvexHull(std::vector<PointF> points);

struct RotatedRect {
  std::array<PointF, 4> corners;  // in order around the rectangle
  double width = 0;               // length of corners[0] -> corners[1]
  double height = 0;              // length of corners[1] -> corners[2]
};

// The minimum-area enclosing rectangle (rotating calipers over the hull's
// edges). REQUIRES: !points.empty().
RotatedRect MinAreaRect(const std::vector<PointF>& points);

// The corners ordered top-left, top-right, bottom-right, bottom-left as
// PaddleOCR orders them: the two leftmost by x (the upper of them first),
// then the two rightmost (the upper of them first).
std::array<PointF, 4> OrderBoxCorners(const std::array<PointF, 4>& corners);

}  // namespace kiln
