#include "onnx/onnx_input_shape.h"

#include <gtest/gtest.h>

namespace kiln {
namespace onnx_input_shape_tests {

TEST(OnnxInputShape, ParsesNameAndDims) {
  std::map<std::string, std::vector<int64_t>> shapes;
  ASSERT_TRUE(AddOnnxInputShape("images:1,3,640,640", &shapes).ok());
  ASSERT_TRUE(AddOnnxInputShape("ns:x:7", &shapes).ok());  // the name is all before the last ':'
  EXPECT_EQ(shapes["images"], (std::vector<int64_t>{1, 3, 640, 640}));
  EXPECT_EQ(shapes["ns:x"], (std::vector<int64_t>{7}));
}

TEST(OnnxInputShape, RefusesMalformedText) {
  std::map<std::string, std::vector<int64_t>> shapes;
  EXPECT_FALSE(AddOnnxInputShape("images", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape(":1,2", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape("x:1,,2", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape("x:1,0", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape("x:1,-3", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape("x:", &shapes).ok());
  Status s = AddOnnxInputShape("x:1,2a", &shapes);
  EXPECT_NE(s.message().find("'2a'"), std::string::npos) << s.message();
  ASSERT_TRUE(AddOnnxInputShape("x:1", &shapes).ok());
  EXPECT_FALSE(AddOnnxInputShape("x:2", &shapes).ok());
}

}  // namespace onnx_input_shape_tests
}  // namespace kiln
