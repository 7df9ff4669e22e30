#include "vision/pipeline_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "vision/ocr_preprocess.h"
#include "vision/pipeline_yaml.h"

namespace kiln {
namespace {

using V = PipelineValue;

struct Port {
  const char* name;
  std::vector<V> accepts;
};

struct StageKind {
  const char* kind;
  std::vector<Port> ports;
  std::vector<const char*> params;  // the settings it takes
  V produces;                       // a model stage produces what it reads
};

const std::vector<StageKind>& Kinds() {
  static const std::vector<StageKind> kinds = {
      {"letterbox", {{"image", {V::kImage}}}, {"width", "height"}, V::kTensor},
      {"yolo_decode", {{"input", {V::kTensor}}, {"letterbox", {V::kTensor}}}, {"conf", "iou", "max_det"}, V::kDetections},
      {"ocr_det_input", {{"image", {V::kImage}}}, {"max_side"}, V::kTensor},
      {"db_postprocess",
       {{"input", {V::kTensor}}, {"det_input", {V::kTensor}}},
       {"bitmap_threshold", "box_threshold", "unclip_ratio"},
       V::kTextBoxes},
      {"crop", {{"boxes", {V::kTextBoxes, V::kDetections}}}, {}, V::kCrops},
      {"resize", {{"input", {V::kCrops}}}, {"width", "height", "mean", "std"}, V::kCropTensors},
      {"ocr_cls_input", {{"input", {V::kCrops}}}, {}, V::kCropTensors},
      {"ocr_rec_input", {{"input", {V::kCrops}}}, {"max_width"}, V::kCropTensors},
      {"model", {{"input", {V::kTensor, V::kCropTensors}}}, {}, V::kTensor},
      {"direction", {{"crops", {V::kCrops}}, {"scores", {V::kCropTensors}}}, {"threshold"}, V::kCrops},
      {"ctc_decode", {{"input", {V::kCropTensors}}, {"crops", {V::kCrops}}}, {"dictionary", "drop_score"}, V::kLines},
      {"classify", {{"input", {V::kCropTensors}}, {"crops", {V::kCrops}}}, {}, V::kClasses},
  };
  return kinds;
}

const StageKind* FindKind(const std::string& kind) {
  for (const StageKind& k : Kinds()) {
    if (kind == k.kind) return &k;
  }
  return nullptr;
}

Expected<int> IntParam(const PipelineStage& s, const char* key, int fallback) {
  if (!s.params.contains(key)) return fallback;
  const auto& v = s.params[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 1 << 16) {
    return InvalidArgument("stage '{}': {} must be a positive integer, not {}", s.name, key, v.dump());
  }
  return v.get<int>();
}

Status CheckNumberParams(const PipelineStage& s) {
  for (const auto& [key, v] : s.params.items()) {
    if (key == "dictionary") {
      if (!v.is_string()) return InvalidArgument("stage '{}': dictionary must be a path", s.name);
    } else if (key == "mean" || key == "std") {
      if (!v.is_array() || v.size() != 3 || !std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number(); })) {
        return InvalidArgument("stage '{}': {} must be three numbers (R, G, B)", s.name, key);
      }
      if (key == "std" && std::any_of(v.begin(), v.end(), [](const auto& x) { return x.template get<double>() == 0; })) {
        return InvalidArgument("stage '{}': std must not be 0", s.name);
      }
    } else if (!v.is_number()) {
      return InvalidArgument("stage '{}': {} must be a number, not {}", s.name, key, v.dump());
    } else if (key == "width" || key == "height" || key == "max_side" || key == "max_width" || key == "max_det") {
      // Sizes and counts: a zero, negative or fractional one has no meaning.
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 1 << 16) {
        return InvalidArgument("stage '{}': {} must be a positive integer, not {}", s.name, key, v.dump());
      }
    }
  }
  return Status::Ok();
}

// The shape a tensor stage produces, -1 where it varies.
Expected<std::vector<int64_t>> StageShape(const PipelineStage& s) {
  if (s.kind == "letterbox" || s.kind == "resize") {
    KILN_ASSIGN_OR_RETURN(int w, IntParam(s, "width", 0));
    KILN_ASSIGN_OR_RETURN(int h, IntParam(s, "height", 0));
    if (!s.params.contains("width") || !s.params.contains("height")) {
      return InvalidArgument("stage '{}': {} needs width and height", s.name, s.kind);
    }
    return std::vector<int64_t>{1, 3, h, w};
  }
  if (s.kind == "ocr_det_input") return std::vector<int64_t>{1, 3, -1, -1};
  if (s.kind == "ocr_cls_input") return std::vector<int64_t>{1, 3, kClsHeight, kClsWidth};
  if (s.kind == "ocr_rec_input") return std::vector<int64_t>{1, 3, kRecHeight, -1};
  return std::vector<int64_t>{};
}

// Orders the stages so that each follows those it reads; a cycle is an
// error naming the stages on it.
Expected<std::vector<PipelineStage>> RunOrder(std::vector<PipelineStage> stages) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < stages.size(); ++i) index[stages[i].name] = i;
  std::vector<int> state(stages.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<size_t> order, path;
  std::function<Status(size_t)> visit = [&](size_t i) -> Status {
    if (state[i] == 2) return Status::Ok();
    if (state[i] == 1) {
      std::vector<std::string> cycle;
      auto from = std::find(path.begin(), path.end(), i);
      for (auto it = from; it != path.end(); ++it) cycle.push_back("'" + stages[*it].name + "'");
      cycle.push_back("'" + stages[i].name + "'");
      return InvalidArgument("stages {} form a cycle", fmt::join(cycle, " -> "));
    }
    state[i] = 1;
    path.push_back(i);
    for (const auto& [port, from_name] : stages[i].inputs) {
      if (from_name != "image") KILN_RETURN_IF_ERROR(visit(index.at(from_name)));
    }
    path.pop_back();
    state[i] = 2;
    order.push_back(i);
    return Status::Ok();
  };
  for (size_t i = 0; i < stages.size(); ++i) KILN_RETURN_IF_ERROR(visit(i));
  std::vector<PipelineStage> ordered;
  for (size_t i : order) ordered.push_back(std::move(stages[i]));
  return ordered;
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).string();
}

}  // namespace

const char* PipelineValueName(PipelineValue v) {
  switch (v) {
    case V::kImage: return "the image";
    case V::kTensor: return "a tensor";
    case V::kCropTensors: return "a tensor per crop";
    case V::kTextBoxes: return "text boxes";
    case V::kDetections: return "detections";
    case V::kCrops: return "crops";
    case V::kLines: return "text lines";
    case V::kClasses: return "classes";
  }
  return "?";
}

std::vector<std::string> PipelineStageKinds() {
  std::vector<std::string> names;
  for (const StageKind& k : Kinds()) names.push_back(k.kind);
  return names;
}

const PipelineStage* FindPipelineStage(const PipelineSpec& spec, const std::string& name) {
  for (const PipelineStage& s : spec.stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Expected<PipelineSpec> ParsePipeline(const nlohmann::json& json, const std::string& base_dir, bool check_files) {
  if (!json.is_object()) return InvalidArgument("a pipeline is a JSON object with \"models\" and \"stages\"");
  for (const auto& [key, v] : json.items()) {
    if (key != "models" && key != "stages" && key != "outputs") {
      return InvalidArgument("unknown pipeline key '{}' (expected models, stages, outputs)", key);
    }
  }
  PipelineSpec spec;
  if (json.contains("models")) {
    if (!json["models"].is_object()) return InvalidArgument("\"models\" must map names to model files");
    for (const auto& [name, path] : json["models"].items()) {
      if (!path.is_string()) return InvalidArgument("model '{}': the path must be a string", name);
      spec.models[name] = ResolvePath(base_dir, path.get<std::string>());
    }
  }
  if (!json.contains("stages") || !json["stages"].is_array() || json["stages"].empty()) {
    return InvalidArgument("a pipeline needs a non-empty \"stages\" array");
  }
  std::vector<PipelineStage> stages;
  std::set<std::string> names;
  for (size_t i = 0; i < json["stages"].size(); ++i) {
    const auto& js = json["stages"][i];
    if (!js.is_object() || !js.contains("name") || !js["name"].is_string() || !js.contains("kind") ||
        !js["kind"].is_string()) {
      return InvalidArgument("stage {} must be an object with a \"name\" and a \"kind\"", i);
    }
    PipelineStage s;
    s.name = js["name"].get<std::string>();
    s.kind = js["kind"].get<std::string>();
    if (s.name == "image" || s.name.empty()) return InvalidArgument("stage {}: '{}' cannot name a stage", i, s.name);
    if (!names.insert(s.name).second) return InvalidArgument("two stages are named '{}'", s.name);
    const StageKind* kind = FindKind(s.kind);
    if (!kind) {
      return InvalidArgument("stage '{}': unknown kind '{}' (known: {})", s.name, s.kind,
                             fmt::join(PipelineStageKinds(), ", "));
    }
    s.params = nlohmann::json::object();
    for (const auto& [key, v] : js.items()) {
      if (key == "name" || key == "kind") continue;
      const bool is_port = std::any_of(kind->ports.begin(), kind->ports.end(),
                                       [&k = key](const Port& p) { return k == p.name; });
      const bool is_param = std::any_of(kind->params.begin(), kind->params.end(),
                                        [&k = key](const char* p) { return k == p; });
      if (is_port) {
        if (!v.is_string()) return InvalidArgument("stage '{}': input '{}' must name a stage", s.name, key);
        s.inputs[key] = v.get<std::string>();
      } else if (is_param) {
        s.params[key] = v;
      } else if (key == "model" && s.kind == "model") {
        if (!v.is_string()) return InvalidArgument("stage '{}': model must name one of \"models\"", s.name);
        s.model = v.get<std::string>();
      } else {
        return InvalidArgument("stage '{}': a {} stage has no '{}'", s.name, s.kind, key);
      }
    }
    for (const Port& p : kind->ports) {
      if (!s.inputs.count(p.name)) return InvalidArgument("stage '{}': input '{}' is wired to nothing", s.name, p.name);
    }
    KILN_RETURN_IF_ERROR(CheckNumberParams(s));
    if (s.kind == "model") {
      if (s.model.empty()) return InvalidArgument("stage '{}': a model stage needs \"model\"", s.name);
      auto m = spec.models.find(s.model);
      if (m == spec.models.end()) return InvalidArgument("stage '{}': no model named '{}' in \"models\"", s.name, s.model);
      std::error_code ec;
      if (check_files && !std::filesystem::is_regular_file(m->second, ec)) {
        return NotFound("stage '{}': model file {} does not exist", s.name, m->second);
      }
    }
    if (s.kind == "ctc_decode") {
      if (!s.params.contains("dictionary")) return InvalidArgument("stage '{}': ctc_decode needs a dictionary", s.name);
      s.params["dictionary"] = ResolvePath(base_dir, s.params["dictionary"].get<std::string>());
      std::error_code ec;
      if (check_files && !std::filesystem::is_regular_file(s.params["dictionary"].get<std::string>(), ec)) {
        return NotFound("stage '{}': dictionary {} does not exist", s.name, s.params["dictionary"].get<std::string>());
      }
    }
    KILN_ASSIGN_OR_RETURN(s.shape, StageShape(s));
    stages.push_back(std::move(s));
  }
  for (const PipelineStage& s : stages) {
    for (const auto& [port, from] : s.inputs) {
      if (from != "image" && !names.count(from)) {
        return InvalidArgument("stage '{}': input '{}' is wired to '{}', which is no stage (nor \"image\")", s.name,
                               port, from);
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(spec.stages, RunOrder(std::move(stages)));

  // What each stage produces, in run order: every port must get a value it takes.
  std::map<std::string, const PipelineStage*> by_name;
  for (PipelineStage& s : spec.stages) {
    const StageKind* kind = FindKind(s.kind);
    for (const Port& p : kind->ports) {
      const std::string& from = s.inputs.at(p.name);
      const V got = from == "image" ? V::kImage : by_name.at(from)->produces;
      if (std::find(p.accepts.begin(), p.accepts.end(), got) == p.accepts.end()) {
        std::vector<std::string> wanted;
        for (V a : p.accepts) wanted.push_back(PipelineValueName(a));
        return InvalidArgument("stage '{}': input '{}' takes {}, but '{}' gives {}", s.name, p.name,
                               fmt::join(wanted, " or "), from, PipelineValueName(got));
      }
    }
    s.produces = kind->produces;
    if (s.kind == "model") {
      const PipelineStage* in = by_name.at(s.inputs.at("input"));
      s.produces = in->produces;
      s.shape = {};  // a model's output shape is known once it runs
    }
    if (s.kind == "yolo_decode" && by_name.at(s.inputs.at("letterbox"))->kind != "letterbox") {
      return InvalidArgument("stage '{}': input 'letterbox' must be a letterbox stage", s.name);
    }
    if (s.kind == "db_postprocess" && by_name.at(s.inputs.at("det_input"))->kind != "ocr_det_input") {
      return InvalidArgument("stage '{}': input 'det_input' must be an ocr_det_input stage", s.name);
    }
    by_name[s.name] = &s;
  }
  if (json.contains("outputs")) {
    if (!json["outputs"].is_array()) return InvalidArgument("\"outputs\" must list stage names");
    for (const auto& o : json["outputs"]) {
      if (!o.is_string() || !by_name.count(o.get<std::string>())) {
        return InvalidArgument("output {} is no stage", o.dump());
      }
      spec.outputs.push_back(o.get<std::string>());
    }
  } else {
    for (const PipelineStage& s : spec.stages) {
      if (s.produces == V::kDetections || s.produces == V::kTextBoxes || s.produces == V::kLines ||
          s.produces == V::kClasses) {
        spec.outputs.push_back(s.name);
      }
    }
  }
  return spec;
}

bool IsPipelineFilePath(const std::string& path) {
  return IsYamlPath(path) || (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0);
}

Expected<nlohmann::json> PipelineTextToJson(const std::string& text, const std::string& path) {
  if (IsYamlPath(path)) return PipelineYamlToJson(text, path);
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) return InvalidArgument("pipeline file {} is not valid JSON", path);
  return json;
}

Expected<PipelineSpec> ReadPipelineFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open pipeline file {}", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  KILN_ASSIGN_OR_RETURN(nlohmann::json json, PipelineTextToJson(text, path));
  auto spec = ParsePipeline(json, std::filesystem::path(path).parent_path().string());
  if (!spec.ok()) return spec.status().WithContext(fmt::format("pipeline {}", path));
  return spec;
}

Status CheckPipelineModelInputs(const PipelineSpec& spec,
                                const std::map<std::string, std::vector<int64_t>>& model_input_dims) {
  std::map<std::string, const PipelineStage*> by_name;
  for (const PipelineStage& s : spec.stages) by_name[s.name] = &s;
  for (const PipelineStage& s : spec.stages) {
    if (s.kind != "model") continue;
    auto it = model_input_dims.find(s.model);
    if (it == model_input_dims.end()) continue;
    const PipelineStage* from = by_name.at(s.inputs.at("input"));
    if (from->shape.empty()) continue;  // another model's output: checked when it runs
    const std::vector<int64_t>& want = it->second;
    bool meet = want.size() == from->shape.size();
    for (size_t d = 0; meet && d < want.size(); ++d) {
      meet = want[d] < 0 || from->shape[d] < 0 || want[d] == from->shape[d];
    }
    if (!meet) {
      auto dims = [](const std::vector<int64_t>& v) {
        std::vector<std::string> s;
        for (int64_t d : v) s.push_back(d < 0 ? "?" : std::to_string(d));
        return fmt::format("[{}]", fmt::join(s, ","));
      };
      return InvalidArgument("stage '{}': model '{}' takes {}, but '{}' gives {}", s.name, s.model, dims(want),
                             from->name, dims(from->shape));
    }
  }
  return Status::Ok();
}

}  // namespace kiln
