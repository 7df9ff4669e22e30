// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand,
// Tile, DepthToSpace and SpaceToDepth through cpu::RunTensorOp, against
// expectations written out or computed by plain index loops here.
#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "graph/tensor_op.h"
#include "unit/tensor_ops/shape_op_test_util.h"

namespace kiln {
namespace shape_view_ops_tests {

using namespace shape_test;

TEST(ShapeViewOps, ShapeWithStartAndEndIsKnownAtCompileTime) {
  TensorData x = Iota({2, 3, 4, 5});
  EXPECT_EQ(Values<int64_t>(Op("Shape").In(x).Run()), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(Values<int64_t>(Op("Shape").In(x).Int("start", 1).Int("end", -1).Run()),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Values<int64_t>(Op("Shape").In(x).Int("start", -10).Int("end", 10).Run()),
            (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(Values<int64_t>(Op("Shape").In(x).Int("start", 3).Int("end", 1).Run()).empty());

  // The value comes with shape inference, for the compiler to fold.
  ShapeContext ctx;
  AttributeMap attrs;
  ctx.op_type = "Shape";
  ctx.node = "s";
  ctx.attrs = &attrs;
  ctx.inputs.push_back(TensorOpInput{&x.type(), nullptr});
  auto r = InferTensorOp(ctx);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->constants[0].has_value());
  EXPECT_EQ(Values<int64_t>(*r->constants[0]), (std::vector<int64_t>{2, 3, 4, 5}));
  ctx.op_type = "Size";
  r = InferTensorOp(ctx);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->constants[0].has_value());
  EXPECT_EQ(r->outputs[0], (TensorType{DType::kI64, {}}));
  EXPECT_EQ(Values<int64_t>(*r->constants[0]), (std::vector<int64_t>{120}));
}

TEST(ShapeViewOps, ReshapeCopiesZerosInfersMinusOneAndHonoursAllowzero) {
  TensorData x = Iota({2, 3, 4});
  TensorData y = Op("Reshape").In(x).In(Ints1({0, -1})).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(Values<float>(y), Values<float>(x));
  EXPECT_EQ(Op("Reshape").In(x).In(Ints1({-1, 0, 2})).Run().type().dims, (std::vector<int64_t>{4, 3, 2}));
  // allowzero: a 0 is a real zero-sized dim.
  TensorData empty = F32({0, 3}, {});
  EXPECT_EQ(Op("Reshape").In(empty).In(Ints1({3, 0})).Int("allowzero", 1).Run().type().dims,
            (std::vector<int64_t>{3, 0}));
}

TEST(ShapeViewOps, ReshapeToAWrongElementCountNamesOpAndNode) {
  const std::string e = Op("Reshape", "reshape_7").In(Iota({2, 3})).In(Ints1({4, 2})).Error();
  EXPECT_NE(e.find("Reshape reshape_7"), std::string::npos) << e;
  EXPECT_NE(e.find("6 elements"), std::string::npos) << e;
  EXPECT_NE(Op("Reshape").In(Iota({2, 3})).In(Ints1({-1, -1})).Error().find("more than one -1"),
            std::string::npos);
  EXPECT_NE(Op("Reshape").In(Iota({2, 3})).In(Ints1({-1, 4})).Error().find("cannot reshape"),
            std::string::npos);
}

TEST(ShapeViewOps, FlattenSqueezeUnsqueezeShapes) {
  TensorData x = Iota({2, 3, 4});
  EXPECT_EQ(Op("Flatten").In(x).Run().type().dims, (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(Op("Flatten").In(x).Int("axis", 0).Run().type().dims, (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(Op("Flatten").In(x).Int("axis", -1).Run().type().dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(Op("Flatten").In(x).Int("axis", 3).Run().type().dims, (std::vector<int64_t>{24, 1}));
  EXPECT_FALSE(Op("Flatten").In(x).Int("axis", 4).Try().ok());

  TensorData z = Iota({1, 3, 1, 2});
  EXPECT_EQ(Op("Squeeze").In(z).Run().type().dims, (std::vector<int64_t>{3, 2}));
  // Opset 13+: axes as an input; before: as an attribute. Negative axes count from the end.
  EXPECT_EQ(Op("Squeeze").In(z).In(Ints1({-2})).Run().type().dims, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(Op("Squeeze").In(z).Ints("axes", {0}).Opset(11).Run().type().dims,
            (std::vector<int64_t>{3, 1, 2}));
  EXPECT_NE(Op("Squeeze", "sq").In(z).In(Ints1({1})).Error().find("Squeeze sq: cannot squeeze axis 1"),
            std::string::npos);

  TensorData y = Op("Unsqueeze").In(x).In(Ints1({0, -1})).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{1, 2, 3, 4, 1}));
  EXPECT_EQ(Values<float>(y), Values<float>(x));
  EXPECT_EQ(Op("Unsqueeze").In(x).Ints("axes", {1, 3}).Opset(11).Run().type().dims,
            (std::vector<int64_t>{2, 1, 3, 1, 4}));
  EXPECT_NE(Op("Unsqueeze").In(x).In(Ints1({1, 1})).Error().find("repeat"), std::string::npos);
  EXPECT_NE(Op("Unsqueeze").In(x).Error().find("needs axes"), std::string::npos);
}

// out[idx] = x[idx permuted back], computed with index loops.
std::vector<float> TransposeReference(const TensorData& x, const std::vector<int64_t>& perm) {
  const std::vector<int64_t>& in = x.type().dims;
  std::vector<int64_t> out_dims;
  for (int64_t p : perm) out_dims.push_back(in[static_cast<size_t>(p)]);
  std::vector<float> xs = Values<float>(x), out;
  ForEachIndex(out_dims, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(in.size());
    for (size_t a = 0; a < perm.size(); ++a) i[static_cast<size_t>(perm[a])] = o[a];
    out.push_back(xs[static_cast<size_t>(Offset(in, i))]);
  });
  return out;
}

TEST(ShapeViewOps, TransposeMatchesIndexLoopsForCommonAndOddPermutations) {
  ThreadPool pool(2);
  TensorData x4 = Iota({2, 3, 4, 5});
  for (const std::vector<int64_t>& perm : std::vector<std::vector<int64_t>>{
           {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}}) {
    TensorData y = Op("Transpose").In(x4).Ints("perm", perm).Run();
    EXPECT_EQ(Values<float>(y), TransposeReference(x4, perm));
  }
  // Default: reversed axes.
  EXPECT_EQ(Values<float>(Op("Transpose").In(x4).Run()), TransposeReference(x4, {3, 2, 1, 0}));
  // Big enough to be split over the pool: a 3-d last-two swap.
  TensorData big = Iota({3, 200, 130});
  EXPECT_EQ(Values<float>(Op("Transpose").In(big).Ints("perm", {0, 2, 1}).Pool(&pool).Run()),
            TransposeReference(big, {0, 2, 1}));
  // Other element sizes move the same way: int64 and bool.
  TensorData i = I64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Values<int64_t>(Op("Transpose").In(i).Run()), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
  TensorData b = TensorData::FromValues<uint8_t>(DType::kBool, {2, 2}, {1, 0, 0, 1});
  EXPECT_EQ(Values<uint8_t>(Op("Transpose").In(b).Ints("perm", {1, 0}).Run()),
            (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_NE(Op("Transpose", "t").In(x4).Ints("perm", {0, 1, 1, 2}).Error().find("Transpose t: perm"),
            std::string::npos);
  EXPECT_FALSE(Op("Transpose").In(x4).Ints("perm", {0, 1, 2}).Try().ok());
}

TEST(ShapeViewOps, ExpandBroadcastsBothWays) {
  TensorData x = F32({3, 1}, {1, 2, 3});
  TensorData y = Op("Expand").In(x).In(Ints1({2, 1, 4})).Run();
  ASSERT_EQ(y.type().dims, (std::vector<int64_t>{2, 3, 4}));
  std::vector<float> want;
  for (int r = 0; r < 2; ++r) {
    for (float v : {1.0f, 2.0f, 3.0f}) {
      for (int c = 0; c < 4; ++c) want.push_back(v);
    }
  }
  EXPECT_EQ(Values<float>(y), want);
  // A shape smaller than the input keeps the input's dims.
  EXPECT_EQ(Op("Expand").In(Iota({2, 3})).In(Ints1({3})).Run().type().dims, (std::vector<int64_t>{2, 3}));
  EXPECT_NE(Op("Expand", "e").In(Iota({2, 3})).In(Ints1({4})).Error().find("Expand e"), std::string::npos);
}

TEST(ShapeViewOps, TileRepeatsEachAxis) {
  TensorData x = F32({2, 2}, {1, 2, 3, 4});
  TensorData y = Op("Tile").In(x).In(Ints1({2, 3})).Run();
  ASSERT_EQ(y.type().dims, (std::vector<int64_t>{4, 6}));
  std::vector<float> want;
  ForEachIndex({4, 6}, [&](const std::vector<int64_t>& i) {
    want.push_back(Values<float>(x)[static_cast<size_t>((i[0] % 2) * 2 + i[1] % 2)]);
  });
  EXPECT_EQ(Values<float>(y), want);
  EXPECT_EQ(Op("Tile").In(x).In(Ints1({0, 1})).Run().type().dims, (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(Op("Tile").In(x).In(Ints1({2})).Try().ok());
}

TEST(ShapeViewOps, DepthToSpaceAndSpaceToDepthMatchTheirDefinitions) {
  const int64_t n = 2, c = 8, h = 2, w = 3, b = 2;
  TensorData x = Iota({n, c, h, w});
  const std::vector<float> xs = Values<float>(x);
  for (const std::string mode : {"DCR", "CRD"}) {
    TensorData y = Op("DepthToSpace").In(x).Int("blocksize", b).Str("mode", mode).Run();
    const int64_t co = c / (b * b);
    ASSERT_EQ(y.type().dims, (std::vector<int64_t>{n, co, h * b, w * b}));
    std::vector<float> want;
    ForEachIndex(y.type().dims, [&](const std::vector<int64_t>& o) {
      const int64_t b1 = o[2] % b, b2 = o[3] % b;
      const int64_t ci = mode == "DCR" ? (b1 * b + b2) * co + o[1] : o[1] * b * b + b1 * b + b2;
      want.push_back(xs[static_cast<size_t>(Offset({n, c, h, w}, {o[0], ci, o[2] / b, o[3] / b}))]);
    });
    EXPECT_EQ(Values<float>(y), want) << mode;
    if (mode == "DCR") {  // SpaceToDepth undoes DCR
      TensorData back = Op("SpaceToDepth").In(y).Int("blocksize", b).Run();
      EXPECT_EQ(Values<float>(back), xs);
    }
  }
  EXPECT_NE(
      Op("DepthToSpace", "d2s").In(Iota({1, 6, 2, 2})).Int("blocksize", 2).Error().find("DepthToSpace d2s"),
      std::string::npos);
  EXPECT_FALSE(Op("SpaceToDepth").In(Iota({1, 1, 3, 2})).Int("blocksize", 2).Try().ok());
}

}  // namespace shape_view_ops_tests
}  // namespace kiln
