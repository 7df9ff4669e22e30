#include "vision/pipeline_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "graph/tensor_type.h"
#include "vision/ctc_decode.h"
#include "vision/detect_pipeline.h"
#include "vision/image_resize.h"
#include "vision/ocr_pipeline.h"
#include "vision/ocr_preprocess.h"
#include "vision/result_json.h"
#include "vision/text_crop.h"

namespace kiln {
namespace {

using V = PipelineValue;
using Quad = std::array<std::array<float, 2>, 4>;

struct Crop {
  Image image;
  Quad box;  // where it was cut, image pixels, top-left first, clockwise
  bool turned = false;
};

struct CropClass {
  Quad box;
  int class_id = 0;
  float score = 0;
};

// A stage's result; which fields hold it depends on what the stage produces.
struct Value {
  std::vector<HostTensor> tensors;  // one, or one per crop; a model stage's first output
  bool per_crop = false;            // tensors holds one per crop
  // Model stages: the first output's name, and every other output by name
  // (one tensor, or one per crop, each).
  std::string first_output;
  std::map<std::string, std::vector<HostTensor>> other_outputs;
  LetterboxGeometry letterbox;      // letterbox stages
  int map_width = 0, map_height = 0;  // ocr_det_input stages
  std::vector<TextBox> text_boxes;
  std::vector<Detection> detections;
  std::vector<Crop> crops;
  std::vector<OcrLine> lines;
  std::vector<CropClass> classes;
};

// Tensors with their dtype, shape and every value (f32, i64 and i32; other
// types their shape alone).
nlohmann::ordered_json TensorsJson(const std::vector<HostTensor>& tensors) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const HostTensor& t : tensors) {
    nlohmann::ordered_json j = {{"dtype", DTypeName(t.type.dtype)}, {"shape", t.type.dims}};
    const int64_t n = t.type.ElementCount();
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    if (t.type.dtype == DType::kF32) {
      for (int64_t i = 0; i < n; ++i) values.push_back(t.data<float>()[i]);
      j["values"] = std::move(values);
    } else if (t.type.dtype == DType::kI64) {
      for (int64_t i = 0; i < n; ++i) values.push_back(t.data<int64_t>()[i]);
      j["values"] = std::move(values);
    } else if (t.type.dtype == DType::kI32) {
      for (int64_t i = 0; i < n; ++i) values.push_back(t.data<int32_t>()[i]);
      j["values"] = std::move(values);
    }
    list.push_back(std::move(j));
  }
  return list;
}

nlohmann::ordered_json QuadJson(const Quad& q) {
  nlohmann::ordered_json box = nlohmann::ordered_json::array();
  for (const auto& p : q) box.push_back({Round2(p[0]), Round2(p[1])});
  return box;
}

float Param(const PipelineStage& s, const char* key, float fallback) {
  return s.params.contains(key) ? s.params[key].get<float>() : fallback;
}

Status CheckF32(const PipelineStage& s, const HostTensor& t) {
  if (t.type.dtype != DType::kF32) {
    return InvalidArgument("stage '{}': its input is {}, expected f32", s.name, t.type.ToString());
  }
  return Status::Ok();
}

// An axis-aligned box's pixels, clipped to the image; empty when nothing is left.
Image CropRect(const Image& image, const float box[4], Quad* quad) {
  const int x1 = std::clamp(static_cast<int>(std::floor(box[0])), 0, image.width);
  const int y1 = std::clamp(static_cast<int>(std::floor(box[1])), 0, image.height);
  const int x2 = std::clamp(static_cast<int>(std::ceil(box[2])), 0, image.width);
  const int y2 = std::clamp(static_cast<int>(std::ceil(box[3])), 0, image.height);
  *quad = {{{box[0], box[1]}, {box[2], box[1]}, {box[2], box[3]}, {box[0], box[3]}}};
  if (x2 <= x1 || y2 <= y1) return Image();
  Image out(x2 - x1, y2 - y1);
  for (int y = y1; y < y2; ++y) std::copy_n(image.pixel(x1, y), 3 * out.width, out.pixel(0, y - y1));
  return out;
}

HostTensor ResizeTensor(const Image& crop, const PipelineStage& s) {
  const int w = static_cast<int>(s.shape[3]), h = static_cast<int>(s.shape[2]);
  const Image scaled = ResizeBilinear(crop, w, h);
  float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
  for (int c = 0; c < 3; ++c) {
    if (s.params.contains("mean")) mean[c] = s.params["mean"][c].get<float>();
    if (s.params.contains("std")) std[c] = s.params["std"][c].get<float>();
  }
  HostTensor t(TensorType{DType::kF32, {1, 3, h, w}});
  float* out = t.data<float>();
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        out[(static_cast<size_t>(c) * h + y) * w + x] = (scaled.pixel(x, y)[c] / 255.0f - mean[c]) / std[c];
      }
  return t;
}

class Runner {
 public:
  Runner(const std::map<std::string, PipelineModel>& models, const Image& image) : models_(models), image_(image) {}

  Status Run(const PipelineStage& s) {
    Value out;
    if (s.kind == "letterbox") {
      out.letterbox = ComputeLetterbox(image_.width, image_.height, static_cast<int>(s.shape[3]),
                                       static_cast<int>(s.shape[2]));
      out.tensors.push_back(LetterboxTensor(image_, out.letterbox));
    } else if (s.kind == "ocr_det_input") {
      DetInput in = MakeDetInput(image_, static_cast<int>(Param(s, "max_side", 960)));
      out.map_width = in.width;
      out.map_height = in.height;
      out.tensors.push_back(std::move(in.tensor));
    } else if (s.kind == "constant") {
      out.tensors.push_back(ConstantTensor(s));
    } else if (s.kind == "model") {
      KILN_RETURN_IF_ERROR(RunModel(s, &out));
    } else if (s.kind == "yolo_decode") {
      const std::vector<HostTensor>& head = Tensors(s, "input");
      KILN_RETURN_IF_ERROR(CheckF32(s, head.at(0)));
      YoloDecodeOptions o;
      o.conf_threshold = Param(s, "conf", o.conf_threshold);
      o.iou_threshold = Param(s, "iou", o.iou_threshold);
      o.max_detections = static_cast<int>(Param(s, "max_det", static_cast<float>(o.max_detections)));
      auto d = DetectionsFromHead(head.at(0), In(s, "letterbox").letterbox, o);
      if (!d.ok()) return d.status().WithContext(fmt::format("stage '{}'", s.name));
      out.detections = std::move(*d);
    } else if (s.kind == "db_postprocess") {
      const HostTensor& map = Tensors(s, "input").at(0);
      const Value& det_in = In(s, "det_input");
      KILN_RETURN_IF_ERROR(CheckF32(s, map));
      const std::vector<int64_t> expected{1, 1, det_in.map_height, det_in.map_width};
      if (map.type.dims != expected) {
        return InvalidArgument("stage '{}': its input is {}, expected [{}] (a probability map of '{}')", s.name,
                               map.type.ToString(), DimsToString(expected), s.inputs.at("det_input"));
      }
      DbOptions o;
      o.bitmap_threshold = Param(s, "bitmap_threshold", o.bitmap_threshold);
      o.box_threshold = Param(s, "box_threshold", o.box_threshold);
      o.unclip_ratio = Param(s, "unclip_ratio", o.unclip_ratio);
      auto boxes = DbPostprocess(map.data<float>(), det_in.map_width, det_in.map_height, image_.width, image_.height, o);
      if (!boxes.ok()) return boxes.status().WithContext(fmt::format("stage '{}'", s.name));
      out.text_boxes = std::move(*boxes);
      SortTextBoxes(&out.text_boxes);
    } else if (s.kind == "crop") {
      const Value& in = In(s, "boxes");
      for (const TextBox& b : in.text_boxes) {
        auto cropped = CropTextBox(image_, b.points);
        if (!cropped.ok()) continue;  // a degenerate box has nothing to read
        out.crops.push_back({std::move(*cropped), b.points, false});
      }
      for (const Detection& d : in.detections) {
        Crop c;
        c.image = CropRect(image_, d.box, &c.box);
        if (!c.image.empty()) out.crops.push_back(std::move(c));
      }
    } else if (s.kind == "resize") {
      for (const Crop& c : In(s, "input").crops) out.tensors.push_back(ResizeTensor(c.image, s));
    } else if (s.kind == "ocr_cls_input") {
      for (const Crop& c : In(s, "input").crops) out.tensors.push_back(MakeClsInput(c.image));
    } else if (s.kind == "ocr_rec_input") {
      const int max_width = static_cast<int>(Param(s, "max_width", 3200));
      for (const Crop& c : In(s, "input").crops) out.tensors.push_back(MakeRecInput(c.image, max_width));
    } else if (s.kind == "direction") {
      out.crops = In(s, "crops").crops;
      const std::vector<HostTensor>& scores = Tensors(s, "scores");
      KILN_RETURN_IF_ERROR(SameCount(s, "scores", scores.size(), out.crops.size()));
      const float threshold = Param(s, "threshold", 0.9f);
      for (size_t i = 0; i < out.crops.size(); ++i) {
        const HostTensor& t = scores[i];
        KILN_RETURN_IF_ERROR(CheckF32(s, t));
        if (t.type.dims != std::vector<int64_t>{1, 2}) {
          return InvalidArgument("stage '{}': the scores are {}, expected f32[1,2] (0 and 180 degrees)", s.name,
                                 t.type.ToString());
        }
        const float* p = t.data<float>();
        if (p[1] > p[0] && p[1] > threshold) {
          out.crops[i].image = Rotate180(out.crops[i].image);
          out.crops[i].turned = !out.crops[i].turned;
        }
      }
    } else if (s.kind == "ctc_decode") {
      KILN_RETURN_IF_ERROR(Ctc(s, &out));
    } else if (s.kind == "classify") {
      const std::vector<HostTensor>& in = Tensors(s, "input");
      const Value& crops = In(s, "crops");
      KILN_RETURN_IF_ERROR(SameCount(s, "input", in.size(), crops.crops.size()));
      for (size_t i = 0; i < in.size(); ++i) {
        const HostTensor& t = in[i];
        KILN_RETURN_IF_ERROR(CheckF32(s, t));
        const int64_t n = t.type.ElementCount();
        if (n <= 0) return InvalidArgument("stage '{}': the scores are empty", s.name);
        const float* p = t.data<float>();
        const int64_t best = std::max_element(p, p + n) - p;
        out.classes.push_back({crops.crops[i].box, static_cast<int>(best), p[best]});
      }
    }
    out.per_crop = s.produces == V::kCropTensors;
    values_[s.name] = std::move(out);
    return Status::Ok();
  }

  nlohmann::ordered_json Result(const PipelineStage& s, const std::string& image_path) const {
    const Value& v = values_.at(s.name);
    nlohmann::ordered_json j = {{"kind", s.kind}};
    switch (s.produces) {
      case V::kDetections: j["detections"] = DetectionsJson(image_path, image_, v.detections)["detections"]; break;
      case V::kLines: j["lines"] = OcrJson(image_path, image_, v.lines)["lines"]; break;
      case V::kTextBoxes: {
        j["boxes"] = nlohmann::ordered_json::array();
        for (const TextBox& b : v.text_boxes) j["boxes"].push_back({{"box", QuadJson(b.points)}, {"score", Round4(b.score)}});
        break;
      }
      case V::kClasses: {
        j["classes"] = nlohmann::ordered_json::array();
        for (const CropClass& c : v.classes) {
          j["classes"].push_back({{"box", QuadJson(c.box)}, {"class", c.class_id}, {"score", Round4(c.score)}});
        }
        break;
      }
      case V::kCrops: {
        j["crops"] = nlohmann::ordered_json::array();
        for (const Crop& c : v.crops) {
          j["crops"].push_back({{"box", QuadJson(c.box)}, {"width", c.image.width}, {"height", c.image.height},
                                {"turned", c.turned}});
        }
        break;
      }
      case V::kTensor:
      case V::kCropTensors: {
        j["shapes"] = nlohmann::ordered_json::array();
        for (const HostTensor& t : v.tensors) j["shapes"].push_back(t.type.dims);
        // A model's outputs, every value: what the model computed, to
        // compare with the model run alone.
        if (s.kind == "model") {
          nlohmann::ordered_json outputs = nlohmann::ordered_json::object();
          outputs[v.first_output] = TensorsJson(v.tensors);
          for (const auto& [name, tensors] : v.other_outputs) outputs[name] = TensorsJson(tensors);
          j["outputs"] = std::move(outputs);
        }
        break;
      }
      case V::kImage: break;
    }
    return j;
  }

 private:
  const Value& In(const PipelineStage& s, const char* port) const { return values_.at(s.inputs.at(port)); }

  // The tensors a port reads: its stage's, or the named output of a model
  // stage ("stage.output").
  const std::vector<HostTensor>& Tensors(const PipelineStage& s, const std::string& port) const {
    const Value& v = values_.at(s.inputs.at(port));
    auto named = s.input_outputs.find(port);
    if (named == s.input_outputs.end() || named->second == v.first_output) return v.tensors;
    return v.other_outputs.at(named->second);
  }

  static HostTensor ConstantTensor(const PipelineStage& s) {
    const std::string dtype = s.params["dtype"].get<std::string>();
    HostTensor t(TensorType{dtype == "f32" ? DType::kF32 : dtype == "i64" ? DType::kI64 : DType::kI32, s.shape});
    const nlohmann::json& values = s.params["values"];
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == "f32") t.data<float>()[i] = values[i].get<float>();
      if (dtype == "i64") t.data<int64_t>()[i] = values[i].get<int64_t>();
      if (dtype == "i32") t.data<int32_t>()[i] = values[i].get<int32_t>();
    }
    return t;
  }

  // Runs a model stage: once, or once per crop when an input is per crop
  // (each run reads that crop's tensor and every single tensor). The inputs
  // are the tensors the stages before made, read where they lie.
  Status RunModel(const PipelineStage& s, Value* out) {
    auto found = models_.find(s.model);
    if (found == models_.end() || !found->second.run) {
      return InvalidArgument("stage '{}': model '{}' is not loaded", s.name, s.model);
    }
    const PipelineModel& m = found->second;
    if (!s.named_inputs && m.inputs.size() != 1) {
      return InvalidArgument("stage '{}': model '{}' takes {} inputs; name them in \"inputs\"", s.name, s.model,
                             m.inputs.size());
    }
    std::vector<const std::vector<HostTensor>*> sources;
    std::vector<bool> per_crop;
    std::vector<std::string> ports;
    for (const std::string& input : m.inputs) {
      const std::string port = s.named_inputs ? input : "input";
      if (!s.inputs.count(port)) {
        return InvalidArgument("stage '{}': model '{}' input '{}' is wired to nothing", s.name, s.model, input);
      }
      ports.push_back(port);
      sources.push_back(&Tensors(s, port));
      per_crop.push_back(values_.at(s.inputs.at(port)).per_crop);
    }
    size_t runs = 1;
    bool crops_seen = false;
    for (size_t i = 0; i < sources.size(); ++i) {
      if (per_crop[i]) {
        if (crops_seen && sources[i]->size() != runs) {
          return InvalidArgument("stage '{}': '{}' holds {} tensors, but another input {}; both must come from the "
                                 "same crops",
                                 s.name, s.inputs.at(ports[i]), sources[i]->size(), runs);
        }
        runs = sources[i]->size();
        crops_seen = true;
      } else if (sources[i]->size() != 1) {
        return InvalidArgument("stage '{}': '{}' holds {} tensors, expected one", s.name, s.inputs.at(ports[i]),
                               sources[i]->size());
      }
    }
    out->first_output = m.outputs.empty() ? std::string() : m.outputs[0];
    std::vector<const HostTensor*> inputs(sources.size());
    for (size_t r = 0; r < runs; ++r) {
      for (size_t i = 0; i < sources.size(); ++i) inputs[i] = &(*sources[i])[per_crop[i] ? r : 0];
      auto ran = m.run(inputs);
      if (!ran.ok()) return ran.status().WithContext(fmt::format("stage '{}' (model '{}')", s.name, s.model));
      if (ran->size() != m.outputs.size() || ran->empty()) {
        return Internal("stage '{}': model '{}' gave {} outputs for its {}", s.name, s.model, ran->size(),
                        m.outputs.size());
      }
      out->tensors.push_back(std::move((*ran)[0]));
      for (size_t j = 1; j < ran->size(); ++j) out->other_outputs[m.outputs[j]].push_back(std::move((*ran)[j]));
    }
    return Status::Ok();
  }

  static Status SameCount(const PipelineStage& s, const char* port, size_t got, size_t crops) {
    if (got == crops) return Status::Ok();
    return InvalidArgument("stage '{}': '{}' holds {} results for {} crops; both must come from the same crops",
                           s.name, s.inputs.at(port), got, crops);
  }

  Status Ctc(const PipelineStage& s, Value* out) {
    const std::string dict = s.params["dictionary"].get<std::string>();
    auto found = characters_.find(dict);
    if (found == characters_.end()) {
      // A compiled pipeline carries the dictionary's text (pipeline_artifact.h).
      std::vector<std::string> chars;
      if (s.params.contains("dictionary_text")) {
        chars = OcrCharactersFromText(s.params["dictionary_text"].get<std::string>());
      } else {
        KILN_ASSIGN_OR_RETURN(chars, LoadOcrCharacters(dict));
      }
      found = characters_.emplace(dict, std::move(chars)).first;
    }
    const std::vector<std::string>& characters = found->second;
    const std::vector<HostTensor>& in = Tensors(s, "input");
    const Value& crops = In(s, "crops");
    KILN_RETURN_IF_ERROR(SameCount(s, "input", in.size(), crops.crops.size()));
    const float drop_score = Param(s, "drop_score", 0.5f);
    for (size_t i = 0; i < in.size(); ++i) {
      const HostTensor& t = in[i];
      KILN_RETURN_IF_ERROR(CheckF32(s, t));
      const auto& dims = t.type.dims;
      if (dims.size() != 3 || dims[0] != 1 || dims[2] != static_cast<int64_t>(characters.size())) {
        return InvalidArgument(
            "stage '{}': its input is {}, expected [1, steps, {}] (the dictionary's {} characters, the blank and "
            "the space): is the dictionary the model's?",
            s.name, t.type.ToString(), characters.size(), characters.size() - 2);
      }
      const CtcResult text =
          CtcGreedyDecode(t.data<float>(), static_cast<int>(dims[1]), static_cast<int>(dims[2]), characters);
      if (text.score < drop_score) continue;
      OcrLine line;
      line.text = text.text;
      line.score = text.score;
      line.box = crops.crops[i].box;
      line.turned = crops.crops[i].turned;
      out->lines.push_back(std::move(line));
    }
    return Status::Ok();
  }

  const std::map<std::string, PipelineModel>& models_;
  const Image& image_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::vector<std::string>> characters_;
};

}  // namespace

Expected<nlohmann::ordered_json> RunPipeline(const PipelineSpec& spec, const std::map<std::string, TensorModel>& models,
                                             const Image& image, const std::string& image_path) {
  std::map<std::string, PipelineModel> wrapped;
  for (const auto& [name, model] : models) {
    if (model) wrapped[name] = OneInputPipelineModel(model);
  }
  return RunPipeline(spec, wrapped, image, image_path);
}

Expected<nlohmann::ordered_json> RunPipeline(const PipelineSpec& spec, const std::map<std::string, PipelineModel>& models,
                                             const Image& image, const std::string& image_path) {
  if (image.empty()) return InvalidArgument("the image is empty");
  Runner runner(models, image);
  for (const PipelineStage& s : spec.stages) KILN_RETURN_IF_ERROR(runner.Run(s));
  nlohmann::ordered_json stages = nlohmann::ordered_json::object();
  for (const std::string& name : spec.outputs) stages[name] = runner.Result(*FindPipelineStage(spec, name), image_path);
  return nlohmann::ordered_json{{"image", image_path}, {"width", image.width}, {"height", image.height},
                                {"stages", stages}};
}

}  // namespace kiln
