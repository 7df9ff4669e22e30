// Pipeline files: the checks that name the stage at fault, and runs with
// models given as functions — the OCR pipeline's lines equal RunOcr's (what
// kiln ocr runs), and a detector -> crop -> classifier pipeline classifies
// each detected box's pixels.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "vision/ctc_decode.h"
#include "vision/ocr_pipeline.h"
#include "vision/pipeline_runner.h"
#include "vision/result_json.h"

namespace kiln {
namespace pipeline_tests {

using nlohmann::json;

std::string TempDir() {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_pipeline_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// PP-OCR as kiln ocr runs it, in pipeline stages.
json OcrPipeline(bool with_cls) {
  json stages = json::array({
      {{"name", "det_input"}, {"kind", "ocr_det_input"}, {"image", "image"}},
      {{"name", "det"}, {"kind", "model"}, {"model", "det"}, {"input", "det_input"}},
      {{"name", "boxes"}, {"kind", "db_postprocess"}, {"input", "det"}, {"det_input", "det_input"}},
      {{"name", "crops"}, {"kind", "crop"}, {"boxes", "boxes"}},
  });
  std::string rec_crops = "crops";
  if (with_cls) {
    stages.push_back({{"name", "cls_input"}, {"kind", "ocr_cls_input"}, {"input", "crops"}});
    stages.push_back({{"name", "cls"}, {"kind", "model"}, {"model", "cls"}, {"input", "cls_input"}});
    stages.push_back({{"name", "upright"}, {"kind", "direction"}, {"crops", "crops"}, {"scores", "cls"}});
    rec_crops = "upright";
  }
  stages.push_back({{"name", "rec_input"}, {"kind", "ocr_rec_input"}, {"input", rec_crops}});
  stages.push_back({{"name", "rec"}, {"kind", "model"}, {"model", "rec"}, {"input", "rec_input"}});
  stages.push_back({{"name", "text"}, {"kind", "ctc_decode"}, {"input", "rec"}, {"crops", rec_crops},
                    {"dictionary", "dict.txt"}});
  json models = {{"det", "det.onnx"}, {"rec", "rec.onnx"}};
  if (with_cls) models["cls"] = "cls.onnx";
  return {{"models", models}, {"stages", stages}};
}

// The detector's map has a rectangle at map pixels x 16..47, y 8..23; the
// recognizer reads "hi" (classes: blank, h, i, space); the classifier says
// "180" for every crop.
std::map<std::string, TensorModel> OcrModelFunctions() {
  std::map<std::string, TensorModel> m;
  m["det"] = [](const HostTensor& in) -> Expected<HostTensor> {
    const int64_t h = in.type.dims[2], w = in.type.dims[3];
    HostTensor out(TensorType{DType::kF32, {1, 1, h, w}});
    float* p = out.data<float>();
    std::fill(p, p + h * w, 0.0f);
    for (int64_t y = 8; y < 24; ++y)
      for (int64_t x = 16; x < 48; ++x) p[y * w + x] = 0.9f;
    return out;
  };
  m["rec"] = [](const HostTensor& in) -> Expected<HostTensor> {
    HostTensor out(TensorType{DType::kF32, {1, 4, 4}});
    // The first pixel's value tells a turned crop from an upright one.
    const float v = in.data<float>()[0] > 0 ? 0.8f : 0.7f;
    const float rows[4][4] = {{0.1f, v, 0.05f, 0.05f}, {0.9f, 0.05f, 0.03f, 0.02f}, {0.1f, 0.1f, 0.7f, 0.1f},
                              {0.1f, 0.1f, 0.7f, 0.1f}};
    std::memcpy(out.data<float>(), rows, sizeof(rows));
    return out;
  };
  m["cls"] = [](const HostTensor&) -> Expected<HostTensor> {
    HostTensor out(TensorType{DType::kF32, {1, 2}});
    out.data<float>()[0] = 0.05f;
    out.data<float>()[1] = 0.95f;
    return out;
  };
  return m;
}

TEST(Pipeline, OcrPipelineEqualsRunOcr) {
  const std::string dir = TempDir();
  WriteFile(dir + "/dict.txt", "h\ni\n");
  Image img(64, 64);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) img.pixel(x, y)[0] = static_cast<uint8_t>(x < 32 ? 255 : 0);
  auto models = OcrModelFunctions();
  for (bool with_cls : {false, true}) {
    auto spec = ParsePipeline(OcrPipeline(with_cls), dir, /*check_files=*/false);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto result = RunPipeline(*spec, models, img, "img.png");
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    OcrModels ocr{models["det"], models["rec"], with_cls ? models["cls"] : TensorModel()};
    auto lines = RunOcr(img, ocr, OcrCharactersFromText("h\ni"));
    ASSERT_TRUE(lines.ok());
    ASSERT_EQ(lines->size(), 1u);
    EXPECT_EQ((*result)["stages"]["text"]["lines"], OcrJson("img.png", img, *lines)["lines"]) << result->dump();
    EXPECT_EQ((*result)["stages"]["boxes"]["boxes"].size(), 1u);
  }
}

// A YOLO head with two boxes (class 0 on the left half, class 1 on the
// right), and a classifier whose class is the crop's brighter half.
TEST(Pipeline, DetectorCropClassifier) {
  json pipeline = {
      {"models", {{"detector", "d.onnx"}, {"classifier", "c.onnx"}}},
      {"stages",
       json::array({
           {{"name", "letterbox"}, {"kind", "letterbox"}, {"image", "image"}, {"width", 64}, {"height", 64}},
           {{"name", "head"}, {"kind", "model"}, {"model", "detector"}, {"input", "letterbox"}},
           {{"name", "objects"}, {"kind", "yolo_decode"}, {"input", "head"}, {"letterbox", "letterbox"}},
           {{"name", "crops"}, {"kind", "crop"}, {"boxes", "objects"}},
           {{"name", "patches"}, {"kind", "resize"}, {"input", "crops"}, {"width", 8}, {"height", 8}},
           {{"name", "logits"}, {"kind", "model"}, {"model", "classifier"}, {"input", "patches"}},
           {{"name", "classes"}, {"kind", "classify"}, {"input", "logits"}, {"crops", "crops"}},
       })}};
  auto spec = ParsePipeline(pipeline, "", false);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->outputs, (std::vector<std::string>{"objects", "classes"}));
  EXPECT_TRUE(CheckPipelineModels(*spec, {{"classifier", {{"x"}, {{1, 3, 8, 8}}, {"logits"}}}}).ok());
  std::map<std::string, TensorModel> models;
  models["detector"] = [](const HostTensor& in) -> Expected<HostTensor> {
    EXPECT_EQ(in.type.dims, (std::vector<int64_t>{1, 3, 64, 64}));
    HostTensor out(TensorType{DType::kF32, {1, 6, 2}});
    const float head[6][2] = {{16, 48}, {32, 32}, {20, 20}, {40, 40}, {0.9f, 0.1f}, {0.1f, 0.8f}};
    std::memcpy(out.data<float>(), head, sizeof(head));
    return out;
  };
  int calls = 0;
  models["classifier"] = [&calls](const HostTensor& in) -> Expected<HostTensor> {
    ++calls;
    EXPECT_EQ(in.type.dims, (std::vector<int64_t>{1, 3, 8, 8}));
    HostTensor out(TensorType{DType::kF32, {1, 2}});
    out.data<float>()[0] = in.data<float>()[0];       // red
    out.data<float>()[1] = in.data<float>()[64 * 2];  // blue
    return out;
  };
  Image img(64, 64);  // red left half, blue right half
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) img.pixel(x, y)[x < 32 ? 0 : 2] = 255;
  auto result = RunPipeline(*spec, models, img, "img.png");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(calls, 2);
  const auto& objects = (*result)["stages"]["objects"]["detections"];
  ASSERT_EQ(objects.size(), 2u) << result->dump();
  EXPECT_EQ(objects[0]["class"], 0);
  EXPECT_EQ(objects[0]["box"].get<std::vector<double>>(), (std::vector<double>{6, 12, 26, 52}));
  const auto& classes = (*result)["stages"]["classes"]["classes"];
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0]["class"], 0);  // the left box is red
  EXPECT_EQ(classes[1]["class"], 1);  // the right one blue
}

std::string ErrorOf(const json& pipeline, bool check_files = false);

// A classifier of two inputs (each crop's patch and a constant weight,
// the same for every crop) and two outputs, whose second output the
// classify stage reads: a model stage runs once per crop, each run reading
// that crop's patch and the one constant.
TEST(Pipeline, PerCropModelOfTwoInputsAndTwoOutputs) {
  json pipeline = {
      {"models", {{"detector", "d.onnx"}, {"classifier", "c.onnx"}}},
      {"stages",
       json::array({
           {{"name", "letterbox"}, {"kind", "letterbox"}, {"image", "image"}, {"width", 64}, {"height", 64}},
           {{"name", "head"}, {"kind", "model"}, {"model", "detector"}, {"input", "letterbox"}},
           {{"name", "objects"}, {"kind", "yolo_decode"}, {"input", "head"}, {"letterbox", "letterbox"}},
           {{"name", "crops"}, {"kind", "crop"}, {"boxes", "objects"}},
           {{"name", "patches"}, {"kind", "resize"}, {"input", "crops"}, {"width", 8}, {"height", 8}},
           {{"name", "weight"}, {"kind", "constant"}, {"dtype", "f32"}, {"shape", {1, 2}}, {"values", {1.0, -1.0}}},
           {{"name", "logits"}, {"kind", "model"}, {"model", "classifier"},
            {"inputs", {{"patch", "patches"}, {"weight", "weight"}}}},
           {{"name", "classes"}, {"kind", "classify"}, {"input", "logits.flipped"}, {"crops", "crops"}},
       })}};
  auto spec = ParsePipeline(pipeline, "", false);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(FindPipelineStage(*spec, "logits")->produces, PipelineValue::kCropTensors);
  const PipelineModelSignature classifier{{"patch", "weight"}, {{1, 3, 8, 8}, {1, 2}}, {"scores", "flipped"}};
  EXPECT_TRUE(CheckPipelineModels(*spec, {{"classifier", classifier}}).ok());
  std::map<std::string, PipelineModel> models;
  models["detector"] = OneInputPipelineModel([](const HostTensor&) -> Expected<HostTensor> {
    HostTensor out(TensorType{DType::kF32, {1, 6, 2}});
    const float head[6][2] = {{16, 48}, {32, 32}, {20, 20}, {40, 40}, {0.9f, 0.1f}, {0.1f, 0.8f}};
    std::memcpy(out.data<float>(), head, sizeof(head));
    return out;
  });
  int calls = 0;
  models["classifier"] = {{"patch", "weight"}, {"scores", "flipped"},
                          [&calls](const std::vector<const HostTensor*>& in) -> Expected<std::vector<HostTensor>> {
                            ++calls;
                            EXPECT_EQ(in.size(), 2u);
                            EXPECT_EQ(in[1]->type.dims, (std::vector<int64_t>{1, 2}));
                            const float* w = in[1]->data<float>();
                            std::vector<HostTensor> out;
                            out.emplace_back(TensorType{DType::kF32, {1, 2}});
                            out.emplace_back(TensorType{DType::kF32, {1, 2}});
                            out[0].data<float>()[0] = w[0] * in[0]->data<float>()[0];       // red
                            out[0].data<float>()[1] = w[0] * in[0]->data<float>()[64 * 2];  // blue
                            // The weight's sign flips the scores: the other class wins.
                            out[1].data<float>()[0] = w[1] * out[0].data<float>()[0];
                            out[1].data<float>()[1] = w[1] * out[0].data<float>()[1];
                            return out;
                          }};
  Image img(64, 64);  // red left half, blue right half
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) img.pixel(x, y)[x < 32 ? 0 : 2] = 255;
  auto result = RunPipeline(*spec, models, img, "img.png");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(calls, 2);
  const auto& classes = (*result)["stages"]["classes"]["classes"];
  ASSERT_EQ(classes.size(), 2u) << result->dump();
  EXPECT_EQ(classes[0]["class"], 1);  // the left box is red: its flipped scores favor blue
  EXPECT_EQ(classes[1]["class"], 0);

  // A stage reading an output the model does not have, a model input left
  // unwired, and a constant of the wrong count are refused.
  json bad = pipeline;
  bad["stages"][7]["input"] = "logits.probabilities";
  auto bad_spec = ParsePipeline(bad, "", false);
  ASSERT_TRUE(bad_spec.ok());
  Status s = CheckPipelineModels(*bad_spec, {{"classifier", classifier}});
  EXPECT_NE(s.message().find("stage 'classes': input 'input' reads output 'probabilities' of 'logits', but model "
                             "'classifier' gives scores, flipped"),
            std::string::npos)
      << s.message();
  bad = pipeline;
  bad["stages"][6]["inputs"].erase("weight");
  bad_spec = ParsePipeline(bad, "", false);
  ASSERT_TRUE(bad_spec.ok());
  s = CheckPipelineModels(*bad_spec, {{"classifier", classifier}});
  EXPECT_NE(s.message().find("stage 'logits': model 'classifier' input 'weight' is wired to nothing"),
            std::string::npos)
      << s.message();
  bad = pipeline;
  bad["stages"][5]["values"] = {1.0};
  EXPECT_NE(ErrorOf(bad).find("stage 'weight': shape [1,2] takes 2 values, and \"values\" holds 1"),
            std::string::npos)
      << ErrorOf(bad);
  bad = pipeline;
  bad["stages"][6]["input"] = "patches";
  EXPECT_NE(ErrorOf(bad).find("stage 'logits': a model stage takes \"input\" (a model of one input) or \"inputs\""),
            std::string::npos)
      << ErrorOf(bad);
}

std::string ErrorOf(const json& pipeline, bool check_files) {
  auto spec = ParsePipeline(pipeline, TempDir(), check_files);
  return spec.ok() ? "" : spec.status().message();
}

TEST(Pipeline, BadFilesAreErrorsNamingTheStage) {
  json p = OcrPipeline(false);
  p["stages"][2]["kind"] = "db_postprocessing";
  EXPECT_NE(ErrorOf(p).find("stage 'boxes': unknown kind 'db_postprocessing'"), std::string::npos) << ErrorOf(p);

  p = OcrPipeline(false);
  p["stages"][3].erase("boxes");
  EXPECT_NE(ErrorOf(p).find("stage 'crops': input 'boxes' is wired to nothing"), std::string::npos) << ErrorOf(p);

  p = OcrPipeline(false);
  p["stages"][3]["boxes"] = "box";
  EXPECT_NE(ErrorOf(p).find("stage 'crops': input 'boxes' is wired to 'box', which is no stage"), std::string::npos)
      << ErrorOf(p);

  p = OcrPipeline(false);
  p["stages"][0]["image"] = "rec";  // det_input <- rec <- rec_input <- crops <- boxes <- det <- det_input
  EXPECT_NE(ErrorOf(p).find("form a cycle"), std::string::npos) << ErrorOf(p);
  EXPECT_NE(ErrorOf(p).find("'det_input'"), std::string::npos) << ErrorOf(p);

  p = OcrPipeline(false);
  WriteFile(TempDir() + "/dict.txt", "h\ni\n");
  EXPECT_NE(ErrorOf(p, true).find("stage 'det': model file"), std::string::npos) << ErrorOf(p, true);
  EXPECT_NE(ErrorOf(p, true).find("does not exist"), std::string::npos);

  p = OcrPipeline(false);
  p["stages"][5]["input"] = "crops";  // the recognizer fed crops, not tensors
  EXPECT_NE(ErrorOf(p).find("stage 'rec': input 'input' takes a tensor or a tensor per crop, but 'crops' gives crops"),
            std::string::npos)
      << ErrorOf(p);

  p = OcrPipeline(false);
  p["stages"][0]["max_side"] = -32;
  EXPECT_NE(ErrorOf(p).find("stage 'det_input': max_side must be a positive integer, not -32"), std::string::npos)
      << ErrorOf(p);

  p = OcrPipeline(false);
  p["stages"][2]["bitmap_treshold"] = 0.3;
  EXPECT_NE(ErrorOf(p).find("stage 'boxes': a db_postprocess stage has no 'bitmap_treshold'"), std::string::npos)
      << ErrorOf(p);
}

TEST(Pipeline, ShapesThatCannotMeetAreErrors) {
  auto spec = ParsePipeline(OcrPipeline(true), "", false);
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(CheckPipelineModels(*spec, {{"det", {{"x"}, {{1, 3, -1, -1}}, {"y"}}},
                                          {"rec", {{"x"}, {{1, 3, 48, -1}}, {"y"}}},
                                          {"cls", {{"x"}, {{1, 3, 48, 192}}, {"y"}}}})
                  .ok());
  const Status s = CheckPipelineModels(*spec, {{"rec", {{"x"}, {{1, 3, 32, -1}}, {"y"}}}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stage 'rec': model 'rec' takes [1,3,32,?], but 'rec_input' gives [1,3,48,?]"),
            std::string::npos)
      << s.message();
}

}  // namespace pipeline_tests
}  // namespace kiln
