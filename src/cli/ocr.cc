// `kiln ocr`: PP-OCR text detection, optional direction classification
// and recognition on one image; lines of text with their boxes as JSON,
// and optionally drawn.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/vision_models.h"
#include "vision/ctc_decode.h"
#include "vision/image_file.h"
#include "vision/ocr_pipeline.h"
#include "vision/result_json.h"

namespace kiln::cli {
namespace {

struct OcrArgs {
  std::string det;
  std::string rec;
  std::string cls;
  std::string dict;
  std::string image;
  std::string json;
  std::string draw;
  int det_max_side = 960;
  float drop_score = 0.5f;
  int threads = 0;
  bool recompile_if_stale = false;
};

// The dictionary: --dict, else ppocr_keys_v1.txt beside the recognizer (as
// the PP-OCR model packages ship it).
Expected<std::string> DictionaryPath(const OcrArgs& a) {
  if (!a.dict.empty()) return a.dict;
  const auto beside = std::filesystem::path(a.rec).parent_path() / "ppocr_keys_v1.txt";
  std::error_code ec;
  if (std::filesystem::exists(beside, ec)) return beside.string();
  return InvalidArgument("--dict FILE is required (no ppocr_keys_v1.txt beside {})", a.rec);
}

Status RunOcrCommand(const OcrArgs& a) {
  KILN_ASSIGN_OR_RETURN(Image image, ReadImageFile(a.image));
  KILN_ASSIGN_OR_RETURN(std::string dict, DictionaryPath(a));
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> characters, LoadOcrCharacters(dict));
  OnnxSessionOptions session_options;
  session_options.threads = a.threads;
  session_options.recompile_if_stale = a.recompile_if_stale;
  KILN_ASSIGN_OR_RETURN(auto det, LoadVisionModel(a.det, session_options, "text detection"));
  KILN_ASSIGN_OR_RETURN(auto rec, LoadVisionModel(a.rec, session_options, "text recognition"));
  std::unique_ptr<OnnxSession> cls;
  if (!a.cls.empty()) {
    KILN_ASSIGN_OR_RETURN(cls, LoadVisionModel(a.cls, session_options, "direction classification"));
  }
  OcrModels models;
  models.det = SessionTensorModel(det.get());
  models.rec = SessionTensorModel(rec.get());
  if (cls) models.cls = SessionTensorModel(cls.get());
  OcrOptions options;
  options.det_max_side = a.det_max_side;
  options.drop_score = a.drop_score;
  KILN_ASSIGN_OR_RETURN(std::vector<OcrLine> lines, RunOcr(image, models, characters, options));
  const nlohmann::ordered_json json = OcrJson(a.image, image, lines);
  if (!a.draw.empty()) DrawOcrLines(&image, lines);
  KILN_RETURN_IF_ERROR(WriteVisionOutputs(json, a.json, &image, a.draw));
  fmt::print("{} lines of text in {} ({}x{}) -> {}\n", lines.size(), a.image, image.width, image.height, a.json);
  return Status::Ok();
}

}  // namespace

void RegisterOcr(CLI::App& app) {
  auto* cmd = app.add_subcommand("ocr", "Read the text in an image with PP-OCR ONNX models");
  auto a = std::make_shared<OcrArgs>();
  cmd->add_option("-m,--det", a->det, "The text detection model (.onnx, PP-OCR DB)")->required();
  cmd->add_option("-r,--rec", a->rec, "The text recognition model (.onnx, PP-OCR CTC)")->required();
  cmd->add_option("--cls", a->cls, "The direction classification model (.onnx), optional");
  cmd->add_option("--dict", a->dict, "The recognizer's dictionary (one character per line)");
  cmd->add_option("--image", a->image, "A JPEG or PNG image")->required();
  cmd->add_option("--json", a->json, "Where to write the lines (JSON)")->required();
  cmd->add_option("--draw", a->draw, "Where to write the image with the text boxes drawn (PNG)");
  cmd->add_option("--det-max-side", a->det_max_side, "Longest side of the detection input")->capture_default_str();
  cmd->add_option("--drop-score", a->drop_score, "Lines recognized with a lower score are dropped")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Compute threads (0: one per physical core)");
  cmd->add_flag("--recompile-if-stale", a->recompile_if_stale,
                "A .kiln model compiled by another kiln kernel-layout version or for an ISA this CPU lacks: "
                "rebuild it from the .onnx file it records, then run");
  cmd->callback([a]() {
    Status s = RunOcrCommand(*a);
    if (!s.ok()) {
      fmt::print(stderr, "kiln ocr: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
