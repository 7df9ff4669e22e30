#include "vision/rotated_rect.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {
namespace {

double Cross(const PointF& o, const PointF& a, const PointF& b) {
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

}  // namespace

std::vector<PointF> ConvexHull(std::vector<PointF> points) {
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  if (points.size() < 3) return points;
  // Andrew's monotone chain.
  std::vector<PointF> hull(2 * points.size());
  size_t k = 0;
  for (const PointF& p : points) {
    while (k >= 2 && Cross(hull[k - 2], hull[k - 1], p) <= 0) --k;
    hull[k++] = p;
  }
  for (size_t i = points.size() - 1, lower = k + 1; i-- > 0;) {
    const PointF& p = points[i];
    while (k >= lower && Cross(hull[k - 2], hull[k - 1], p) <= 0) --k;
    hull[k++] = p;
  }
  hull.resize(k - 1);
  return hull;
}

RotatedRect MinAreaRect(const std::vector<PointF>& points) {
  const std::vector<PointF> hull = ConvexHull(points);
  RotatedRect best;
  if (hull.size() == 1) {
    best.corners = {hull[0], hull[0], hull[0], hull[0]};
    return best;
  }
  double best_area = std::numeric_limits<double>::infinity();
  const size_t n = hull.size();
  // A segment's hull has two points and one edge direction worth trying.
  const size_t edges = n == 2 ? 1 : n;
  for (size_t i = 0; i < edges; ++i) {
    const PointF& a = hull[i];
    const PointF& b = hull[(i + 1) % n];
    const double len = std::hypot(b[0] - a[0], b[1] - a[1]);
    if (len == 0) continue;
    const double ux = (b[0] - a[0]) / len, uy = (b[1] - a[1]) / len;  // along the edge
    const double vx = -uy, vy = ux;                                    // across it
    double min_u = std::numeric_limits<double>::infinity(), max_u = -min_u, min_v = min_u, max_v = -min_u;
    for (const PointF& p : hull) {
      const double pu = p[0] * ux + p[1] * uy, pv = p[0] * vx + p[1] * vy;
      min_u = std::min(min_u, pu);
      max_u = std::max(max_u, pu);
      min_v = std::min(min_v, pv);
      max_v = std::max(max_v, pv);
    }
    const double area = (max_u - min_u) * (max_v - min_v);
    if (area < best_area) {
      best_area = area;
      auto at = [&](double u, double v) { return PointF{u * ux + v * vx, u * uy + v * vy}; };
      best.corners = {at(min_u, min_v), at(max_u, min_v), at(max_u, max_v), at(min_u, max_v)};
      best.width = max_u - min_u;
      best.height = max_v - min_v;
    }
  }
  return best;
}

std::array<PointF, 4> OrderBoxCorners(const std::array<PointF, 4>& corners) {
  std::array<PointF, 4> p = corners;
  std::stable_sort(p.begin(), p.end(), [](const PointF& a, const PointF& b) { return a[0] < b[0]; });
  const PointF& tl = p[1][1] > p[0][1] ? p[0] : p[1];
  const PointF& bl = p[1][1] > p[0][1] ? p[1] : p[0];
  const PointF& tr = p[3][1] > p[2][1] ? p[2] : p[3];
  const PointF& br = p[3][1] > p[2][1] ? p[3] : p[2];
  return {tl, tr, br, bl};
}

}  // namespace kiln
