// The OCR pipeline's plumbing with models given as functions: the
// detector's map places one text region, the recognizer's output spells a
// word; the result carries the box in image pixels and the decoded text,
// and malformed model outputs are errors naming the model.
#include <gtest/gtest.h>

#include "vision/ctc_decode.h"
#include "vision/ocr_pipeline.h"

namespace kiln {
namespace ocr_pipeline_tests {

// A detector whose map has a rectangle at map pixels x 16..47, y 8..23 for
// any input size, and a recognizer that reads "hi" (classes: blank, h, i, space).
OcrModels Models(int* rec_calls, std::vector<int64_t>* rec_width) {
  OcrModels m;
  m.det = [](const HostTensor& in) -> Expected<HostTensor> {
    const int64_t h = in.type.dims[2], w = in.type.dims[3];
    HostTensor out(TensorType{DType::kF32, {1, 1, h, w}});
    float* p = out.data<float>();
    std::fill(p, p + h * w, 0.0f);
    for (int64_t y = 8; y < 24; ++y)
      for (int64_t x = 16; x < 48; ++x) p[y * w + x] = 0.9f;
    return out;
  };
  m.rec = [rec_calls, rec_width](const HostTensor& in) -> Expected<HostTensor> {
    ++*rec_calls;
    rec_width->push_back(in.type.dims[3]);
    HostTensor out(TensorType{DType::kF32, {1, 4, 4}});
    const float rows[4][4] = {{0.1f, 0.8f, 0.05f, 0.05f}, {0.9f, 0.05f, 0.03f, 0.02f}, {0.1f, 0.1f, 0.7f, 0.1f},
                              {0.1f, 0.1f, 0.7f, 0.1f}};
    std::memcpy(out.data<float>(), rows, sizeof(rows));
    return out;
  };
  return m;
}

TEST(OcrPipeline, DetectsCropsAndReads) {
  Image img(64, 64);  // det input 64x64: map = image
  int calls = 0;
  std::vector<int64_t> widths;
  const auto chars = OcrCharactersFromText("h\ni");
  auto lines = RunOcr(img, Models(&calls, &widths), chars);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].text, "hi");
  EXPECT_NEAR((*lines)[0].score, 0.75f, 1e-6);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(widths, (std::vector<int64_t>{320}));
  // Region 31 x 15 about (31.5, 15.5), d = 31 * 15 * 1.5 / 92 = 7.58:
  // x 31.5 -+ 23.08, y 15.5 -+ 15.08 -> (8, 0) .. (55, 31).
  EXPECT_FLOAT_EQ((*lines)[0].box[0][0], 8);
  EXPECT_FLOAT_EQ((*lines)[0].box[0][1], 0);
  EXPECT_FLOAT_EQ((*lines)[0].box[2][0], 55);
  EXPECT_FLOAT_EQ((*lines)[0].box[2][1], 31);
}

TEST(OcrPipeline, ClassifierTurnsConfidentUpsideDownCrops) {
  Image img(64, 64);
  int calls = 0;
  std::vector<int64_t> widths;
  OcrModels m = Models(&calls, &widths);
  m.cls = [](const HostTensor& in) -> Expected<HostTensor> {
    EXPECT_EQ(in.type.dims, (std::vector<int64_t>{1, 3, 48, 192}));
    HostTensor out(TensorType{DType::kF32, {1, 2}});
    out.data<float>()[0] = 0.05f;
    out.data<float>()[1] = 0.95f;
    return out;
  };
  auto lines = RunOcr(img, m, OcrCharactersFromText("h\ni"));
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_TRUE((*lines)[0].turned);
}

TEST(OcrPipeline, WrongDictionaryOrMapIsAnError) {
  Image img(64, 64);
  int calls = 0;
  std::vector<int64_t> widths;
  auto lines = RunOcr(img, Models(&calls, &widths), OcrCharactersFromText("h\ni\nx"));
  ASSERT_FALSE(lines.ok());
  EXPECT_NE(lines.status().message().find("dictionary"), std::string::npos) << lines.status().message();
  OcrModels m = Models(&calls, &widths);
  m.det = [](const HostTensor&) -> Expected<HostTensor> {
    return HostTensor(TensorType{DType::kF32, {1, 1, 5, 5}});
  };
  auto bad = RunOcr(img, m, OcrCharactersFromText("h\ni"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("text detection"), std::string::npos) << bad.status().message();
}

}  // namespace ocr_pipeline_tests
}  // namespace kiln
