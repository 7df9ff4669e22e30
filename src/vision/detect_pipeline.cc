#include "vision/detect_pipeline.h"

namespace kiln {

Expected<std::vector<Detection>> DetectionsFromHead(const HostTensor& head, const LetterboxGeometry& geometry,
                                                    const YoloDecodeOptions& options) {
  if (head.type.dtype != DType::kF32) {
    return InvalidArgument("the detector's output is {}, expected f32[1, 4 + classes, anchors]", head.type.ToString());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Detection> detections,
                        DetectFromYoloOutput(head.data<float>(), head.type.dims, options));
  for (Detection& d : detections) MapBoxToSource(geometry, d.box);
  return detections;
}

Expected<std::vector<Detection>> RunDetector(const Image& image, const TensorModel& model, int input_width,
                                             int input_height, const YoloDecodeOptions& options) {
  if (image.empty()) return InvalidArgument("the image is empty");
  if (input_width <= 0 || input_height <= 0) {
    return InvalidArgument("detector input size {}x{} must be positive", input_width, input_height);
  }
  const LetterboxGeometry g = ComputeLetterbox(image.width, image.height, input_width, input_height);
  auto head = model(LetterboxTensor(image, g));
  if (!head.ok()) return head.status().WithContext("detector model");
  return DetectionsFromHead(*head, g, options);
}

}  // namespace kiln
