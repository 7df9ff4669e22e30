// The head of an Ultralytics YOLOv8 export decoded into detections: one
// output of shape [1, 4 + classes, anchors] whose column a holds the box
// (cx, cy, w, h, in input pixels) and then one score per class. Then
// non-maximum suppression as Ultralytics' non_max_suppression does it
// (one label per box, class-aware, at most 300 kept).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace kiln {

struct Detection {
  float box[4] = {0, 0, 0, 0};  // x1, y1, x2, y2
  float score = 0;
  int class_id = 0;
};

struct YoloDecodeOptions {
  float conf_threshold = 0.25f;  // a box's best class score must exceed it
  float iou_threshold = 0.45f;   // suppressed above this IoU with a kept box of its class
  int max_detections = 300;
  int max_candidates = 30000;  // boxes NMS considers, the best first
};

// The candidates of one image's head output: every anchor whose best class
// score exceeds the threshold, with that class, in anchor order.
// `dims` must be [1, 4 + classes, anchors] with classes >= 1.
Expected<std::vector<Detection>> DecodeYoloOutput(const float* data, const std::vector<int64_t>& dims,
                                                  float conf_threshold);

// Intersection over union of two (x1, y1, x2, y2) boxes; 0 when both are empty.
float BoxIoU(const float a[4], const float b[4]);

// Greedy class-aware NMS: candidates by descending score (stable for equal
// scores), the first `max_candidates` considered; a box is dropped when its
// IoU with a kept box of the same class is above the threshold. Returns the
// kept boxes by descending score, at most `max_detections`.
std::vector<Detection> NonMaxSuppression(std::vector<Detection> candidates, const YoloDecodeOptions& options);

// Decode then NMS.
Expected<std::vector<Detection>> DetectFromYoloOutput(const float* data, const std::vector<int64_t>& dims,
                                                      const YoloDecodeOptions& options);

}  // namespace kiln
