#include "vision/ocr_pipeline.h"

#include "graph/tensor_type.h"
#include "vision/ctc_decode.h"
#include "vision/ocr_preprocess.h"
#include "vision/text_crop.h"

namespace kiln {
namespace {

Status CheckF32(const HostTensor& t, const char* model) {
  if (t.type.dtype != DType::kF32) {
    return InvalidArgument("the {} model's output is {}, expected f32", model, t.type.ToString());
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<OcrLine>> RunOcr(const Image& image, const OcrModels& models,
                                      const std::vector<std::string>& characters, const OcrOptions& options) {
  if (image.empty()) return InvalidArgument("the image is empty");
  DetInput det_in = MakeDetInput(image, options.det_max_side);
  auto det_out = models.det(det_in.tensor);
  if (!det_out.ok()) return det_out.status().WithContext("text detection model");
  KILN_RETURN_IF_ERROR(CheckF32(*det_out, "text detection"));
  const std::vector<int64_t> expected_map{1, 1, det_in.height, det_in.width};
  if (det_out->type.dims != expected_map) {
    return InvalidArgument("the text detection model's output is {}, expected [{}] (a probability map of the input)",
                           det_out->type.ToString(), DimsToString(expected_map));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<TextBox> boxes, DbPostprocess(det_out->data<float>(), det_in.width, det_in.height,
                                                                  image.width, image.height, options.db));
  SortTextBoxes(&boxes);

  std::vector<OcrLine> lines;
  for (const TextBox& box : boxes) {
    auto cropped = CropTextBox(image, box.points);
    if (!cropped.ok()) continue;  // a degenerate box has no text to read
    Image crop = std::move(*cropped);
    OcrLine line;
    line.box = box.points;
    if (models.cls) {
      auto cls_out = models.cls(MakeClsInput(crop));
      if (!cls_out.ok()) return cls_out.status().WithContext("direction classification model");
      KILN_RETURN_IF_ERROR(CheckF32(*cls_out, "direction classification"));
      if (cls_out->type.dims != std::vector<int64_t>{1, 2}) {
        return InvalidArgument("the direction classification model's output is {}, expected f32[1,2]",
                               cls_out->type.ToString());
      }
      const float* p = cls_out->data<float>();
      if (p[1] > p[0] && p[1] > options.cls_threshold) {
        crop = Rotate180(crop);
        line.turned = true;
      }
    }
    auto rec_out = models.rec(MakeRecInput(crop, options.rec_max_width));
    if (!rec_out.ok()) return rec_out.status().WithContext("text recognition model");
    KILN_RETURN_IF_ERROR(CheckF32(*rec_out, "text recognition"));
    const auto& dims = rec_out->type.dims;
    if (dims.size() != 3 || dims[0] != 1 || dims[2] != static_cast<int64_t>(characters.size())) {
      return InvalidArgument(
          "the text recognition model's output is {}, expected [1, steps, {}] (the dictionary's {} characters, "
          "the blank and the space): is the dictionary the model's?",
          rec_out->type.ToString(), characters.size(), characters.size() - 2);
    }
    const CtcResult text = CtcGreedyDecode(rec_out->data<float>(), static_cast<int>(dims[1]),
                                           static_cast<int>(dims[2]), characters);
    if (text.score < options.drop_score) continue;
    line.text = text.text;
    line.score = text.score;
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace kiln
