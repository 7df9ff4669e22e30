// ConstantOfShape, Range, OneHot, Trilu and EyeLike through
// cpu::RunTensorOp, against values written out here.
#include <gtest/gtest.h>

#include "core/half.h"
#include "unit/tensor_ops/shape_op_test_util.h"

namespace kiln {
namespace shape_generate_ops_tests {

using namespace shape_test;

TEST(ShapeGenerateOps, ConstantOfShapeFillsInTheAttributesDtype) {
  TensorData y = Op("ConstantOfShape").In(Ints1({2, 3})).Run();
  EXPECT_EQ(y.type(), (TensorType{DType::kF32, {2, 3}}));
  EXPECT_EQ(Values<float>(y), std::vector<float>(6, 0.0f));
  y = Op("ConstantOfShape")
          .In(Ints1({4}))
          .Float("value", -7)
          .Int("value_dtype", static_cast<int>(DType::kI64))
          .Run();
  EXPECT_EQ(Values<int64_t>(y), std::vector<int64_t>(4, -7));
  y = Op("ConstantOfShape")
          .In(Ints1({3}))
          .Float("value", 1.5)
          .Int("value_dtype", static_cast<int>(DType::kF16))
          .Run();
  for (uint16_t h : Values<uint16_t>(y)) EXPECT_EQ(F16ToF32(h), 1.5f);
  y = Op("ConstantOfShape")
          .In(Ints1({2}))
          .Float("value", 1)
          .Int("value_dtype", static_cast<int>(DType::kBool))
          .Run();
  EXPECT_EQ(Values<uint8_t>(y), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(Op("ConstantOfShape").In(Ints1({0, 5})).Run().type().dims, (std::vector<int64_t>{0, 5}));
  EXPECT_FALSE(Op("ConstantOfShape").In(Ints1({-1})).Try().ok());
}

TEST(ShapeGenerateOps, RangeCountsUpAndDown) {
  EXPECT_EQ(Values<int64_t>(Op("Range").In(I64({}, {1})).In(I64({}, {10})).In(I64({}, {3})).Run()),
            (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(Values<int32_t>(Op("Range").In(I32({}, {10})).In(I32({}, {4})).In(I32({}, {-3})).Run()),
            (std::vector<int32_t>{10, 7}));
  EXPECT_EQ(Values<float>(Op("Range").In(F32({}, {0})).In(F32({}, {1})).In(F32({}, {0.25f})).Run()),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_TRUE(Values<int64_t>(Op("Range").In(I64({}, {5})).In(I64({}, {1})).In(I64({}, {1})).Run()).empty());
  EXPECT_NE(
      Op("Range", "r").In(I64({}, {0})).In(I64({}, {3})).In(I64({}, {0})).Error().find("Range r: delta is 0"),
      std::string::npos);
}

TEST(ShapeGenerateOps, OneHotOnAnyAxisWithNegativeAndOutOfRangeIndices) {
  TensorData idx = I64({3}, {0, -1, 5});
  TensorData values = F32({2}, {0, 9});
  TensorData y = Op("OneHot").In(idx).In(I64({}, {3})).In(values).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{9, 0, 0, 0, 0, 9, 0, 0, 0}));
  y = Op("OneHot").In(idx).In(F32({}, {3})).In(values).Int("axis", 0).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{9, 0, 0, 0, 0, 0, 0, 9, 0}));
  EXPECT_FALSE(Op("OneHot").In(idx).In(I64({}, {0})).In(values).Try().ok());
}

TEST(ShapeGenerateOps, TriluKeepsATriangleOfEachMatrix) {
  TensorData x = F32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(Values<float>(Op("Trilu").In(x).Run()),
            (std::vector<float>{1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}));
  EXPECT_EQ(Values<float>(Op("Trilu").In(x).In(I64({}, {1})).Run()),
            (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12}));
  EXPECT_EQ(Values<float>(Op("Trilu").In(x).Int("upper", 0).Run()),
            (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 0, 0, 10, 11, 0}));
  EXPECT_EQ(Values<float>(Op("Trilu").In(x).In(I64({}, {-1})).Int("upper", 0).Run()),
            (std::vector<float>{0, 0, 0, 4, 0, 0, 0, 0, 0, 10, 0, 0}));
  EXPECT_FALSE(Op("Trilu").In(F32({3}, {1, 2, 3})).Try().ok());
}

TEST(ShapeGenerateOps, EyeLikeWithOffsetAndOnnxDtype) {
  TensorData x = F32({2, 3}, {5, 5, 5, 5, 5, 5});
  EXPECT_EQ(Values<float>(Op("EyeLike").In(x).Run()), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  // dtype 7 is ONNX's int64.
  TensorData y = Op("EyeLike").In(x).Int("k", 1).Int("dtype", 7).Run();
  EXPECT_EQ(y.type().dtype, DType::kI64);
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{0, 1, 0, 0, 0, 1}));
  EXPECT_FALSE(Op("EyeLike").In(F32({2}, {1, 2})).Try().ok());
}

}  // namespace shape_generate_ops_tests
}  // namespace kiln
