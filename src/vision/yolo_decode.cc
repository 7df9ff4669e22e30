#include "vision/yolo_decode.h"

#include <algorithm>
#include <cmath>

#include "graph/tensor_type.h"

namespace kiln {

Expected<std::vector<Detection>> DecodeYoloOutput(const float* data, const std::vector<int64_t>& dims,
                                                  float conf_threshold) {
  if (dims.size() != 3 || dims[0] != 1 || dims[1] < 5 || dims[2] < 1) {
    return InvalidArgument(
        "a YOLOv8 detector's output must be [1, 4 + classes, anchors] with at least one class and anchor; "
        "this one is [{}]",
        DimsToString(dims));
  }
  const int64_t rows = dims[1], anchors = dims[2];
  const int64_t classes = rows - 4;
  std::vector<Detection> out;
  for (int64_t a = 0; a < anchors; ++a) {
    int best = 0;
    float best_score = data[4 * anchors + a];
    for (int64_t c = 1; c < classes; ++c) {
      const float s = data[(4 + c) * anchors + a];
      if (s > best_score) {
        best_score = s;
        best = static_cast<int>(c);
      }
    }
    if (!(best_score > conf_threshold)) continue;  // NaN scores never pass
    const float cx = data[a], cy = data[anchors + a], w = data[2 * anchors + a], h = data[3 * anchors + a];
    Detection d;
    d.box[0] = cx - w / 2;
    d.box[1] = cy - h / 2;
    d.box[2] = cx + w / 2;
    d.box[3] = cy + h / 2;
    d.score = best_score;
    d.class_id = best;
    out.push_back(d);
  }
  return out;
}

float BoxIoU(const float a[4], const float b[4]) {
  const float area_a = std::max(0.0f, a[2] - a[0]) * std::max(0.0f, a[3] - a[1]);
  const float area_b = std::max(0.0f, b[2] - b[0]) * std::max(0.0f, b[3] - b[1]);
  const float iw = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
  const float ih = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
  const float inter = iw * ih;
  const float uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

std::vector<Detection> NonMaxSuppression(std::vector<Detection> candidates, const YoloDecodeOptions& options) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Detection& x, const Detection& y) { return x.score > y.score; });
  if (static_cast<int64_t>(candidates.size()) > options.max_candidates) candidates.resize(options.max_candidates);
  std::vector<Detection> kept;
  for (const Detection& d : candidates) {
    if (static_cast<int>(kept.size()) >= options.max_detections) break;
    bool suppressed = false;
    for (const Detection& k : kept) {
      if (k.class_id == d.class_id && BoxIoU(k.box, d.box) > options.iou_threshold) {
        suppressed = true;
        break;
      }
    }
    if (!suppressed) kept.push_back(d);
  }
  return kept;
}

Expected<std::vector<Detection>> DetectFromYoloOutput(const float* data, const std::vector<int64_t>& dims,
                                                      const YoloDecodeOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::vector<Detection> candidates, DecodeYoloOutput(data, dims, options.conf_threshold));
  return NonMaxSuppression(std::move(candidates), options);
}

}  // namespace kiln
