// The YOLOv8 head decode on a synthetic output tensor, and NMS against a
// hand-computed case.
#include <gtest/gtest.h>

#include "vision/yolo_decode.h"

namespace kiln {
namespace yolo_decode_tests {

// Builds a [1, 4 + classes, anchors] head from per-anchor rows.
struct Head {
  int classes;
  std::vector<std::vector<float>> anchors;  // cx, cy, w, h, scores...
  std::vector<float> Data() const {
    const size_t n = anchors.size();
    std::vector<float> d((4 + classes) * n);
    for (size_t a = 0; a < n; ++a)
      for (int r = 0; r < 4 + classes; ++r) d[r * n + a] = anchors[a][r];
    return d;
  }
  std::vector<int64_t> Dims() const { return {1, 4 + classes, static_cast<int64_t>(anchors.size())}; }
};

TEST(YoloDecode, PicksBestClassAboveThresholdAndConvertsBoxes) {
  Head h{3, {{50, 40, 20, 10, 0.1f, 0.8f, 0.3f},    // class 1
             {10, 10, 4, 4, 0.2f, 0.25f, 0.1f},     // best 0.25: not above 0.25
             {100, 100, 50, 30, 0.0f, 0.0f, 0.9f}}}; // class 2
  const auto data = h.Data();
  auto r = DecodeYoloOutput(data.data(), h.Dims(), 0.25f);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].class_id, 1);
  EXPECT_FLOAT_EQ((*r)[0].score, 0.8f);
  EXPECT_FLOAT_EQ((*r)[0].box[0], 40);
  EXPECT_FLOAT_EQ((*r)[0].box[1], 35);
  EXPECT_FLOAT_EQ((*r)[0].box[2], 60);
  EXPECT_FLOAT_EQ((*r)[0].box[3], 45);
  EXPECT_EQ((*r)[1].class_id, 2);
  EXPECT_FLOAT_EQ((*r)[1].box[0], 75);
  EXPECT_FLOAT_EQ((*r)[1].box[3], 115);
}

TEST(YoloDecode, BadShapesAreErrors) {
  std::vector<float> d(40);
  EXPECT_FALSE(DecodeYoloOutput(d.data(), {1, 4, 10}, 0.25f).ok());     // no class rows
  EXPECT_FALSE(DecodeYoloOutput(d.data(), {2, 5, 4}, 0.25f).ok());      // batch 2
  EXPECT_FALSE(DecodeYoloOutput(d.data(), {1, 5, 2, 4}, 0.25f).ok());   // rank 4
}

TEST(Nms, HandComputedCase) {
  // A: [0,0,10,10] 0.9 class 0; B: [1,0,11,10] 0.8 class 0, IoU(A,B) =
  // 90 / 110 = 0.818 -> suppressed; C: [5,0,15,10] 0.7 class 0, IoU(A,C) =
  // 50 / 150 = 0.333 -> kept at 0.45; D: same box as A but class 1 -> kept
  // (class-aware); E: [0,0,10,10] 0.6 class 1 duplicates D -> suppressed.
  auto det = [](float x1, float y1, float x2, float y2, float s, int c) {
    Detection d;
    d.box[0] = x1, d.box[1] = y1, d.box[2] = x2, d.box[3] = y2;
    d.score = s;
    d.class_id = c;
    return d;
  };
  std::vector<Detection> in{det(5, 0, 15, 10, 0.7f, 0), det(0, 0, 10, 10, 0.6f, 1), det(1, 0, 11, 10, 0.8f, 0),
                            det(0, 0, 10, 10, 0.9f, 0), det(0, 0, 10, 10, 0.65f, 1)};
  YoloDecodeOptions o;
  o.iou_threshold = 0.45f;
  auto kept = NonMaxSuppression(in, o);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_FLOAT_EQ(kept[0].score, 0.9f);
  EXPECT_FLOAT_EQ(kept[1].score, 0.7f);
  EXPECT_FLOAT_EQ(kept[2].score, 0.65f);
  EXPECT_EQ(kept[2].class_id, 1);
  // At IoU threshold 0.3, C (0.333 with A) goes too.
  o.iou_threshold = 0.3f;
  EXPECT_EQ(NonMaxSuppression(in, o).size(), 2u);
  // At most max_detections.
  o.iou_threshold = 0.99f;
  o.max_detections = 2;
  EXPECT_EQ(NonMaxSuppression(in, o).size(), 2u);
}

TEST(Nms, IoUOfDisjointAndEmptyBoxes) {
  const float a[4] = {0, 0, 10, 10}, b[4] = {20, 20, 30, 30}, e[4] = {5, 5, 5, 5};
  EXPECT_FLOAT_EQ(BoxIoU(a, b), 0);
  EXPECT_FLOAT_EQ(BoxIoU(a, e), 0);
  EXPECT_FLOAT_EQ(BoxIoU(e, e), 0);
  EXPECT_FLOAT_EQ(BoxIoU(a, a), 1);
}

}  // namespace yolo_decode_tests
}  // namespace kiln
