// A YOLOv8-style detector end to end on one image: letterbox to the model's
// input size (letterbox.h), run, decode the head and suppress overlaps
// (yolo_decode.h), map the boxes back to the image.
#pragma once

#include <vector>

#include "vision/image.h"
#include "vision/letterbox.h"
#include "vision/tensor_model.h"
#include "vision/yolo_decode.h"

namespace kiln {

// The head's output (f32[1, 4 + classes, anchors], input pixels) to
// detections in the original image's pixels.
Expected<std::vector<Detection>> DetectionsFromHead(const HostTensor& head, const LetterboxGeometry& geometry,
                                                    const YoloDecodeOptions& options);

Expected<std::vector<Detection>> RunDetector(const Image& image, const TensorModel& model, int input_width,
                                             int input_height, const YoloDecodeOptions& options);

}  // namespace kiln
