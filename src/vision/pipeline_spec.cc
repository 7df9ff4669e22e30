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
      {"constant", {}, {"dtype", "shape", "values"}, V::kTensor},
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

// The element types a constant stage may hold.
bool IsConstantDType(const std::string& dtype) { return dtype == "f32" || dtype == "i64" || dtype == "i32"; }

// A constant stage: a dtype, a shape and exactly as many values, integers
// for the integer types.
Expected<std::vector<int64_t>> ConstantShape(const PipelineStage& s) {
  for (const char* key : {"dtype", "shape", "values"}) {
    if (!s.params.contains(key)) return InvalidArgument("stage '{}': a constant needs \"{}\"", s.name, key);
  }
  const nlohmann::json& dtype = s.params["dtype"];
  if (!dtype.is_string() || !IsConstantDType(dtype.get<std::string>())) {
    return InvalidArgument("stage '{}': dtype must be \"f32\", \"i64\" or \"i32\", not {}", s.name, dtype.dump());
  }
  const nlohmann::json& shape = s.params["shape"];
  if (!shape.is_array() || shape.size() > 8) return InvalidArgument("stage '{}': shape must list at most 8 sizes", s.name);
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 1 << 20) {
      return InvalidArgument("stage '{}': shape {} holds {}, not a size", s.name, shape.dump(), d.dump());
    }
    dims.push_back(d.get<int64_t>());
    count *= dims.back();
    if (count > 1 << 20) return InvalidArgument("stage '{}': shape {} holds over 2^20 values", s.name, shape.dump());
  }
  const nlohmann::json& values = s.params["values"];
  if (!values.is_array() || static_cast<int64_t>(values.size()) != count) {
    return InvalidArgument("stage '{}': shape {} takes {} values, and \"values\" {}", s.name, shape.dump(), count,
                           values.is_array() ? fmt::format("holds {}", values.size()) : "is no list");
  }
  const bool integers = dtype.get<std::string>() != "f32";
  for (const auto& v : values) {
    if (!v.is_number() || (integers && !v.is_number_integer())) {
      return InvalidArgument("stage '{}': {} is not {}", s.name, v.dump(), integers ? "an integer" : "a number");
    }
  }
  return dims;
}

Status CheckNumberParams(const PipelineStage& s) {
  if (s.kind == "constant") return Status::Ok();  // ConstantShape checks them
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
  if (s.kind == "constant") return ConstantShape(s);
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
      } else if (key == "inputs" && s.kind == "model") {
        if (!v.is_object() || v.empty()) {
          return InvalidArgument("stage '{}': inputs must map the model's input names to stages", s.name);
        }
        for (const auto& [input, from] : v.items()) {
          if (!from.is_string()) return InvalidArgument("stage '{}': input '{}' must name a stage", s.name, input);
          s.inputs[input] = from.get<std::string>();
        }
        s.named_inputs = true;
      } else {
        return InvalidArgument("stage '{}': a {} stage has no '{}'", s.name, s.kind, key);
      }
    }
    if (s.kind == "model" && s.named_inputs == js.contains("input")) {
      return InvalidArgument("stage '{}': a model stage takes \"input\" (a model of one input) or \"inputs\" "
                             "(each of its inputs named), one of the two", s.name);
    }
    for (const Port& p : kind->ports) {
      if (!s.named_inputs && !s.inputs.count(p.name)) {
        return InvalidArgument("stage '{}': input '{}' is wired to nothing", s.name, p.name);
      }
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
  // "stage.output" reads a model stage's named output: the port keeps the
  // stage, and the output's name beside it.
  for (PipelineStage& s : stages) {
    for (auto& [port, from] : s.inputs) {
      if (from == "image" || names.count(from)) continue;
      const size_t dot = from.rfind('.');
      if (dot != std::string::npos && dot > 0 && dot + 1 < from.size() && names.count(from.substr(0, dot))) {
        s.input_outputs[port] = from.substr(dot + 1);
        from = from.substr(0, dot);
        continue;
      }
      return InvalidArgument("stage '{}': input '{}' is wired to '{}', which is no stage (nor \"image\", nor "
                             "\"stage.output\")",
                             s.name, port, from);
    }
  }
  KILN_ASSIGN_OR_RETURN(spec.stages, RunOrder(std::move(stages)));

  // What each stage produces, in run order: every port must get a value it takes.
  std::map<std::string, const PipelineStage*> by_name;
  for (PipelineStage& s : spec.stages) {
    const StageKind* kind = FindKind(s.kind);
    for (const auto& [port, output] : s.input_outputs) {
      if (by_name.at(s.inputs.at(port))->kind != "model") {
        return InvalidArgument("stage '{}': input '{}' reads output '{}' of '{}', which is no model stage", s.name, port,
                               output, s.inputs.at(port));
      }
    }
    // A model stage's ports are its model's inputs when it names them.
    std::vector<Port> ports = kind->ports;
    if (s.named_inputs) {
      ports.clear();
      for (const auto& [input, from] : s.inputs) ports.push_back({input.c_str(), {V::kTensor, V::kCropTensors}});
    }
    for (const Port& p : ports) {
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
      // Run once per crop when any input is per crop; single tensors (a
      // constant) go to every run.
      s.produces = V::kTensor;
      for (const auto& [port, from] : s.inputs) {
        if (by_name.at(from)->produces == V::kCropTensors) s.produces = V::kCropTensors;
      }
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
  nlohmann::json json;
  std::map<std::string, int> lines;  // a YAML file's: schema errors name the line
  if (IsYamlPath(path)) {
    KILN_ASSIGN_OR_RETURN(json, PipelineYamlToJson(text, path, &lines));
  } else {
    KILN_ASSIGN_OR_RETURN(json, PipelineTextToJson(text, path));
  }
  auto spec = ParsePipeline(json, std::filesystem::path(path).parent_path().string());
  if (!spec.ok() && IsYamlPath(path)) return WithYamlLine(spec.status(), json, lines, path);
  if (!spec.ok()) return spec.status().WithContext(fmt::format("pipeline {}", path));
  return spec;
}

Status CheckPipelineModels(const PipelineSpec& spec, const std::map<std::string, PipelineModelSignature>& models) {
  std::map<std::string, const PipelineStage*> by_name;
  for (const PipelineStage& s : spec.stages) by_name[s.name] = &s;
  auto dims_text = [](const std::vector<int64_t>& v) {
    std::vector<std::string> s;
    for (int64_t d : v) s.push_back(d < 0 ? "?" : std::to_string(d));
    return fmt::format("[{}]", fmt::join(s, ","));
  };
  for (const PipelineStage& s : spec.stages) {
    for (const auto& [port, output] : s.input_outputs) {
      const PipelineStage* from = by_name.at(s.inputs.at(port));
      auto m = models.find(from->model);
      if (m == models.end()) continue;
      const std::vector<std::string>& outputs = m->second.outputs;
      if (std::find(outputs.begin(), outputs.end(), output) == outputs.end()) {
        return InvalidArgument("stage '{}': input '{}' reads output '{}' of '{}', but model '{}' gives {}", s.name, port,
                               output, from->name, from->model, fmt::join(outputs, ", "));
      }
    }
    if (s.kind != "model") continue;
    auto it = models.find(s.model);
    if (it == models.end()) continue;
    const PipelineModelSignature& sig = it->second;
    if (!s.named_inputs && sig.inputs.size() != 1) {
      return InvalidArgument("stage '{}': model '{}' takes {} inputs ({}); wire each with \"inputs\": {{NAME: STAGE}}",
                             s.name, s.model, sig.inputs.size(), fmt::join(sig.inputs, ", "));
    }
    if (s.named_inputs) {
      for (const auto& [input, from] : s.inputs) {
        if (std::find(sig.inputs.begin(), sig.inputs.end(), input) == sig.inputs.end()) {
          return InvalidArgument("stage '{}': model '{}' has no input '{}' (its inputs: {})", s.name, s.model, input,
                                 fmt::join(sig.inputs, ", "));
        }
      }
      for (const std::string& input : sig.inputs) {
        if (!s.inputs.count(input)) {
          return InvalidArgument("stage '{}': model '{}' input '{}' is wired to nothing", s.name, s.model, input);
        }
      }
    }
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      const std::string port = s.named_inputs ? sig.inputs[i] : "input";
      if (s.input_outputs.count(port)) continue;  // another model's output: checked when it runs
      const PipelineStage* from = by_name.at(s.inputs.at(port));
      if (from->shape.empty()) continue;
      const std::vector<int64_t>& want = sig.input_dims[i];
      bool meet = want.size() == from->shape.size();
      for (size_t d = 0; meet && d < want.size(); ++d) {
        meet = want[d] < 0 || from->shape[d] < 0 || want[d] == from->shape[d];
      }
      if (!meet) {
        const std::string which = s.named_inputs ? fmt::format(" input '{}'", sig.inputs[i]) : "";
        return InvalidArgument("stage '{}': model '{}'{} takes {}, but '{}' gives {}", s.name, s.model, which,
                               dims_text(want), from->name, dims_text(from->shape));
      }
    }
  }
  return Status::Ok();
}

}  // namespace kiln
