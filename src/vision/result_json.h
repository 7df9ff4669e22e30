// The vision commands' results as JSON, and their drawings.
//   detect: {"image": PATH, "width": W, "height": H,
//            "detections": [{"box": [x1, y1, x2, y2], "score": S, "class": C}]}
//   ocr:    {"image": PATH, "width": W, "height": H,
//            "lines": [{"text": T, "score": S, "box": [[x, y] x 4]}]}
// Boxes in original-image pixels; detections by descending score, lines in
// reading order.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vision/image.h"
#include "vision/ocr_pipeline.h"
#include "vision/yolo_decode.h"

namespace kiln {

nlohmann::ordered_json DetectionsJson(const std::string& image_path, const Image& image,
                              const std::vector<Detection>& detections);
nlohmann::ordered_json OcrJson(const std::string& image_path, const Image& image, const std::vector<OcrLine>& lines);

// Coordinates to 2 decimals and scores to 4, as the JSON results give them.
double Round2(double v);
double Round4(double v);

// Box outlines in their class's color, each labeled "class score".
void DrawDetections(Image* image, const std::vector<Detection>& detections);
// Each line's box outline.
void DrawOcrLines(Image* image, const std::vector<OcrLine>& lines);

}  // namespace kiln
