// PP-OCR end to end on one image: text detection (DB post-processing),
// each box cut out upright, optional direction classification (a crop the
// classifier calls "180" with probability above 0.9 is turned around),
// recognition with greedy CTC decoding; lines with a recognition score
// under 0.5 are dropped (PaddleOCR's drop_score), the rest in reading order.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "vision/db_postprocess.h"
#include "vision/image.h"
#include "vision/tensor_model.h"

namespace kiln {

struct OcrOptions {
  DbOptions db;
  int det_max_side = 960;
  float cls_threshold = 0.9f;
  float drop_score = 0.5f;
  int rec_max_width = 3200;
};

struct OcrLine {
  std::string text;
  float score = 0;                             // recognition score
  std::array<std::array<float, 2>, 4> box;     // image pixels, top-left first, clockwise
  bool turned = false;                         // the classifier turned the crop by 180 degrees
};

struct OcrModels {
  TensorModel det;
  TensorModel rec;
  TensorModel cls;  // may be empty: no direction classification
};

// `characters`: the recognizer's classes (LoadOcrCharacters).
Expected<std::vector<OcrLine>> RunOcr(const Image& image, const OcrModels& models,
                                      const std::vector<std::string>& characters, const OcrOptions& options = {});

}  // namespace kiln
