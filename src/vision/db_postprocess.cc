#include "vision/db_postprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "vision/rotated_rect.h"

namespace kiln {
namespace {

// The regions of the bitmap (8-connected), as their leftmost and rightmost
// pixel in each row they cover: enough for the convex hull.
struct Region {
  std::vector<PointF> outline;
};

std::vector<Region> FindRegions(const std::vector<uint8_t>& bitmap, int w, int h, int max_regions) {
  std::vector<int32_t> label(static_cast<size_t>(w) * h, -1);
  std::vector<Region> regions;
  std::vector<int32_t> stack;
  // Per region, per row: min and max x (collected while flooding).
  std::vector<std::pair<int, int>> row_span(h);
  std::vector<int32_t> row_owner(h, -1);  // the region whose span row_span[y] holds
  std::vector<int> rows_touched;
  for (int y0 = 0; y0 < h; ++y0) {
    for (int x0 = 0; x0 < w; ++x0) {
      const size_t start = static_cast<size_t>(y0) * w + x0;
      if (!bitmap[start] || label[start] >= 0) continue;
      if (static_cast<int>(regions.size()) >= max_regions) return regions;
      const int id = static_cast<int>(regions.size());
      rows_touched.clear();
      label[start] = id;
      stack.assign(1, static_cast<int32_t>(start));
      while (!stack.empty()) {
        const int32_t i = stack.back();
        stack.pop_back();
        const int x = i % w, y = i / w;
        auto& span = row_span[y];
        if (row_owner[y] != id) {
          row_owner[y] = id;
          rows_touched.push_back(y);
          span = {x, x};
        } else {
          span.first = std::min(span.first, x);
          span.second = std::max(span.second, x);
        }
        for (int dy = -1; dy <= 1; ++dy) {
          const int ny = y + dy;
          if (ny < 0 || ny >= h) continue;
          for (int dx = -1; dx <= 1; ++dx) {
            const int nx = x + dx;
            if (nx < 0 || nx >= w) continue;
            const size_t j = static_cast<size_t>(ny) * w + nx;
            if (bitmap[j] && label[j] < 0) {
              label[j] = id;
              stack.push_back(static_cast<int32_t>(j));
            }
          }
        }
      }
      Region r;
      for (int y : rows_touched) {
        r.outline.push_back({static_cast<double>(row_span[y].first), static_cast<double>(y)});
        r.outline.push_back({static_cast<double>(row_span[y].second), static_cast<double>(y)});
      }
      regions.push_back(std::move(r));
    }
  }
  return regions;
}

double ShortSide(const RotatedRect& r) { return std::min(r.width, r.height); }

}  // namespace

float BoxScore(const float* prob, int map_width, int map_height, const std::array<std::array<double, 2>, 4>& box) {
  double min_x = box[0][0], max_x = box[0][0], min_y = box[0][1], max_y = box[0][1];
  for (const auto& p : box) {
    min_x = std::min(min_x, p[0]);
    max_x = std::max(max_x, p[0]);
    min_y = std::min(min_y, p[1]);
    max_y = std::max(max_y, p[1]);
  }
  const int x0 = std::clamp(static_cast<int>(std::floor(min_x)), 0, map_width - 1);
  const int x1 = std::clamp(static_cast<int>(std::ceil(max_x)), 0, map_width - 1);
  const int y0 = std::clamp(static_cast<int>(std::floor(min_y)), 0, map_height - 1);
  const int y1 = std::clamp(static_cast<int>(std::ceil(max_y)), 0, map_height - 1);
  // The corners truncated to integers relative to (x0, y0), as the mask is
  // drawn; a pixel is inside when it is on the inner side of (or on) every
  // edge.
  std::array<std::array<int64_t, 2>, 4> q;
  for (int i = 0; i < 4; ++i) {
    q[i] = {static_cast<int64_t>(box[i][0] - x0), static_cast<int64_t>(box[i][1] - y0)};
  }
  double sum = 0;
  int64_t count = 0;
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) {
      const int64_t px = x - x0, py = y - y0;
      bool has_pos = false, has_neg = false;
      for (int i = 0; i < 4; ++i) {
        const auto& a = q[i];
        const auto& b = q[(i + 1) % 4];
        const int64_t c = (b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0]);
        has_pos |= c > 0;
        has_neg |= c < 0;
      }
      if (has_pos && has_neg) continue;
      sum += prob[static_cast<size_t>(y) * map_width + x];
      ++count;
    }
  }
  return count ? static_cast<float>(sum / count) : 0.0f;
}

Expected<std::vector<TextBox>> DbPostprocess(const float* prob, int map_width, int map_height, int image_width,
                                             int image_height, const DbOptions& options) {
  if (map_width <= 0 || map_height <= 0 || image_width <= 0 || image_height <= 0) {
    return InvalidArgument("text detection map of {}x{} for an image of {}x{}: sizes must be positive", map_width,
                           map_height, image_width, image_height);
  }
  std::vector<uint8_t> bitmap(static_cast<size_t>(map_width) * map_height);
  for (size_t i = 0; i < bitmap.size(); ++i) bitmap[i] = prob[i] > options.bitmap_threshold;
  std::vector<TextBox> boxes;
  for (const Region& region : FindRegions(bitmap, map_width, map_height, options.max_candidates)) {
    const RotatedRect rect = MinAreaRect(region.outline);
    if (ShortSide(rect) < options.min_size) continue;
    const auto corners = OrderBoxCorners(rect.corners);
    const float score = BoxScore(prob, map_width, map_height, corners);
    if (score < options.box_threshold) continue;
    // Unclip: grow by d on every side, about the rectangle's center.
    const double area = rect.width * rect.height, perimeter = 2 * (rect.width + rect.height);
    const double d = area * options.unclip_ratio / perimeter;
    if (rect.width <= 0 || rect.height <= 0) continue;
    const double cx = (corners[0][0] + corners[1][0] + corners[2][0] + corners[3][0]) / 4;
    const double cy = (corners[0][1] + corners[1][1] + corners[2][1] + corners[3][1]) / 4;
    const double ux = (rect.corners[1][0] - rect.corners[0][0]) / rect.width;
    const double uy = (rect.corners[1][1] - rect.corners[0][1]) / rect.width;
    const double vx = -uy, vy = ux;
    const double half_w = rect.width / 2 + d, half_h = rect.height / 2 + d;
    if (std::min(half_w, half_h) * 2 < options.min_size + 2) continue;
    std::array<PointF, 4> grown;
    const int signs[4][2] = {{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};
    for (int i = 0; i < 4; ++i) {
      grown[i] = {cx + signs[i][0] * half_w * ux + signs[i][1] * half_h * vx,
                  cy + signs[i][0] * half_w * uy + signs[i][1] * half_h * vy};
    }
    std::array<PointF, 4> mapped;
    for (int i = 0; i < 4; ++i) {
      const PointF p = grown[i];
      // Halves to even, as numpy's round.
      mapped[i] = {std::clamp(std::nearbyint(p[0] / map_width * image_width), 0.0, static_cast<double>(image_width)),
                   std::clamp(std::nearbyint(p[1] / map_height * image_height), 0.0,
                              static_cast<double>(image_height))};
    }
    const auto ordered = OrderBoxCorners(mapped);
    TextBox box;
    box.score = score;
    for (int i = 0; i < 4; ++i) {
      box.points[i] = {static_cast<float>(std::clamp(ordered[i][0], 0.0, image_width - 1.0)),
                       static_cast<float>(std::clamp(ordered[i][1], 0.0, image_height - 1.0))};
    }
    auto edge = [&](int a, int b) {
      return static_cast<int>(
          std::hypot(box.points[a][0] - box.points[b][0], box.points[a][1] - box.points[b][1]));
    };
    if (edge(0, 1) <= 3 || edge(0, 3) <= 3) continue;
    boxes.push_back(box);
  }
  return boxes;
}

void SortTextBoxes(std::vector<TextBox>* boxes) {
  auto& b = *boxes;
  std::stable_sort(b.begin(), b.end(), [](const TextBox& x, const TextBox& y) {
    if (x.points[0][1] != y.points[0][1]) return x.points[0][1] < y.points[0][1];
    return x.points[0][0] < y.points[0][0];
  });
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    for (size_t j = i + 1; j-- > 0;) {
      if (std::fabs(b[j + 1].points[0][1] - b[j].points[0][1]) < 10 && b[j + 1].points[0][0] < b[j].points[0][0]) {
        std::swap(b[j], b[j + 1]);
      } else {
        break;
      }
    }
  }
}

}  // namespace kiln
