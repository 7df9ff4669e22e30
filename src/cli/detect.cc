// `kiln detect`: a YOLOv8-style detector (Ultralytics' ONNX export) on one
// image; boxes, scores and classes as JSON, and optionally drawn.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/vision_models.h"
#include "core/npy.h"
#include "onnx/onnx_input_shape.h"
#include "vision/detect_pipeline.h"
#include "vision/image_file.h"
#include "vision/result_json.h"

namespace kiln::cli {
namespace {

struct DetectArgs {
  std::string model;
  std::string image;
  float conf = 0.25f;
  float iou = 0.45f;
  int max_det = 300;
  std::string json;
  std::string draw;
  int input_size = 640;
  int threads = 0;
  std::vector<std::string> input_shapes;
  std::string raw_output;
  bool recompile_if_stale = false;
};

// The detector's input H x W: fixed by the model (or --input-shape), else
// --input-size square.
Expected<std::pair<int, int>> InputSize(const OnnxSession& session, const DetectArgs& a) {
  const OnnxTensorInfo& in = session.inputs()[0];
  if (in.dims.size() != 4 || (in.dims[1] != 3 && in.dims[1] != -1)) {
    return InvalidArgument("the detector's input {} is [{}]; expected an image batch [1, 3, H, W]", in.name,
                           DimsToString(in.dims));
  }
  const int h = in.dims[2] > 0 ? static_cast<int>(in.dims[2]) : a.input_size;
  const int w = in.dims[3] > 0 ? static_cast<int>(in.dims[3]) : a.input_size;
  return std::make_pair(h, w);
}

Status RunDetect(const DetectArgs& a) {
  KILN_ASSIGN_OR_RETURN(Image image, ReadImageFile(a.image));
  YoloDecodeOptions options;
  options.conf_threshold = a.conf;
  options.iou_threshold = a.iou;
  options.max_detections = a.max_det;
  std::vector<Detection> detections;
  if (!a.raw_output.empty()) {
    // The head's output from elsewhere (another runtime) for this image
    // letterboxed to --input-size: decoded as if kiln had run the model.
    KILN_ASSIGN_OR_RETURN(NpyArray npy, ReadNpy(a.raw_output));
    HostTensor head(TensorType{npy.dtype, npy.dims});
    if (npy.data.size() != head.bytes.size()) return Internal("{}: .npy size mismatch", a.raw_output);
    std::copy(npy.data.begin(), npy.data.end(), head.bytes.begin());
    const LetterboxGeometry g = ComputeLetterbox(image.width, image.height, a.input_size, a.input_size);
    KILN_ASSIGN_OR_RETURN(detections, DetectionsFromHead(head, g, options));
  } else {
    if (a.model.empty()) return InvalidArgument("-m DETECTOR.onnx is required");
    OnnxSessionOptions session_options;
    session_options.threads = a.threads;
    session_options.recompile_if_stale = a.recompile_if_stale;
    for (const std::string& s : a.input_shapes) {
      KILN_RETURN_IF_ERROR(AddOnnxInputShape(s, &session_options.input_shapes));
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<OnnxSession> session, LoadVisionModel(a.model, session_options, "detector"));
    KILN_ASSIGN_OR_RETURN(auto size, InputSize(*session, a));
    KILN_ASSIGN_OR_RETURN(detections,
                          RunDetector(image, SessionTensorModel(session.get()), size.second, size.first, options));
  }
  const nlohmann::ordered_json json = DetectionsJson(a.image, image, detections);
  if (!a.draw.empty()) DrawDetections(&image, detections);
  KILN_RETURN_IF_ERROR(WriteVisionOutputs(json, a.json, &image, a.draw));
  fmt::print("{} detections in {} ({}x{}) -> {}\n", detections.size(), a.image, image.width, image.height, a.json);
  return Status::Ok();
}

}  // namespace

void RegisterDetect(CLI::App& app) {
  auto* cmd = app.add_subcommand("detect", "Run a YOLOv8-style ONNX detector on an image");
  auto a = std::make_shared<DetectArgs>();
  cmd->add_option("-m,--model", a->model, "The detector (.onnx, Ultralytics YOLOv8 export layout)");
  cmd->add_option("--image", a->image, "A JPEG or PNG image")->required();
  cmd->add_option("--conf", a->conf, "Minimum class score of a detection")->capture_default_str();
  cmd->add_option("--iou", a->iou, "IoU above which NMS drops the lower-scored box of a class")->capture_default_str();
  cmd->add_option("--max-det", a->max_det, "Most detections kept")->capture_default_str();
  cmd->add_option("--json", a->json, "Where to write the detections (JSON)")->required();
  cmd->add_option("--draw", a->draw, "Where to write the image with the boxes drawn (PNG)");
  cmd->add_option("--input-size", a->input_size, "Input side for a model whose H and W are not fixed")
      ->capture_default_str();
  cmd->add_option("--input-shape", a->input_shapes, "NAME:DIMS fixes the model input's shape");
  cmd->add_option("--threads", a->threads, "Compute threads (0: one per physical core)");
  cmd->add_flag("--recompile-if-stale", a->recompile_if_stale,
                "A .kiln detector compiled by another kiln kernel-layout version or for an ISA this CPU lacks: "
                "rebuild it from the .onnx file it records, then run");
  // Decodes a head output saved as .npy instead of running a model (for
  // comparing the decode and NMS with another implementation's).
  cmd->add_option("--raw-output", a->raw_output)->group("");
  cmd->callback([a]() {
    Status s = RunDetect(*a);
    if (!s.ok()) {
      fmt::print(stderr, "kiln detect: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
