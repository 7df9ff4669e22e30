#include "vision/result_json.h"

#include <fmt/format.h>

#include <cmath>

#include "vision/draw.h"

namespace kiln {

// Two decimals are a hundredth of a pixel; more only adds noise.
double Round2(double v) { return std::round(v * 100) / 100; }
double Round4(double v) { return std::round(v * 10000) / 10000; }

nlohmann::ordered_json DetectionsJson(const std::string& image_path, const Image& image,
                              const std::vector<Detection>& detections) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Detection& d : detections) {
    list.push_back({{"box", {Round2(d.box[0]), Round2(d.box[1]), Round2(d.box[2]), Round2(d.box[3])}},
                    {"score", Round4(d.score)},
                    {"class", d.class_id}});
  }
  return {{"image", image_path}, {"width", image.width}, {"height", image.height}, {"detections", list}};
}

nlohmann::ordered_json OcrJson(const std::string& image_path, const Image& image, const std::vector<OcrLine>& lines) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const OcrLine& l : lines) {
    nlohmann::ordered_json box = nlohmann::ordered_json::array();
    for (const auto& p : l.box) box.push_back({Round2(p[0]), Round2(p[1])});
    list.push_back({{"text", l.text}, {"score", Round4(l.score)}, {"box", box}});
  }
  return {{"image", image_path}, {"width", image.width}, {"height", image.height}, {"lines", list}};
}

void DrawDetections(Image* image, const std::vector<Detection>& detections) {
  // The lowest scores first, so that the best boxes are drawn on top.
  for (auto it = detections.rbegin(); it != detections.rend(); ++it) {
    const Color color = PaletteColor(it->class_id);
    DrawRectangle(image, it->box, color);
    const int label_height = 14;
    const int y = static_cast<int>(it->box[1]) - label_height;
    DrawLabel(image, static_cast<int>(it->box[0]), y < 0 ? static_cast<int>(it->box[1]) : y,
              fmt::format("{} {:.2f}", it->class_id, it->score), color);
  }
}

void DrawOcrLines(Image* image, const std::vector<OcrLine>& lines) {
  for (const OcrLine& l : lines) {
    std::vector<std::array<float, 2>> points(l.box.begin(), l.box.end());
    DrawPolygon(image, points, Color{0, 200, 0});
  }
}

}  // namespace kiln
