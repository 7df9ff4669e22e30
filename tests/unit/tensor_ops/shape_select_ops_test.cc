// Concat, Split, Slice, Gather, GatherElements, GatherND, ScatterElements,
// ScatterND, Pad and NonZero through cpu::RunTensorOp, against
// expectations written out or computed by plain index loops here.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "backend/cpu/tensor_kernels/tensor_kernel.h"
#include "core/thread_pool.h"
#include "graph/tensor_op.h"
#include "unit/tensor_ops/shape_op_test_util.h"

namespace kiln {
namespace shape_select_ops_tests {

using namespace shape_test;

TEST(ShapeSelectOps, ConcatJoinsAlongANegativeAxis) {
  ThreadPool pool(2);
  TensorData a = F32({2, 2}, {1, 2, 3, 4});
  TensorData b = F32({2, 1}, {5, 6});
  TensorData y = Op("Concat").In(a).In(b).Int("axis", -1).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(Values<float>(Op("Concat").In(a).In(a).Int("axis", 0).Run()),
            (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4}));
  // Big, over the pool: C2f-style channel concat of [1, 64, 40, 40] pieces.
  TensorData p = Iota({1, 64, 40, 40});
  TensorData q = Iota({1, 32, 40, 40});
  TensorData big = Op("Concat").In(p).In(q).Int("axis", 1).Pool(&pool).Run();
  std::vector<float> want = Values<float>(p);
  const std::vector<float> qs = Values<float>(q);
  want.insert(want.end(), qs.begin(), qs.end());
  EXPECT_EQ(Values<float>(big), want);
}

TEST(ShapeSelectOps, ConcatOfMismatchedShapesNamesOpAndNode) {
  const std::string e = Op("Concat", "cat3").In(Iota({2, 2})).In(Iota({3, 1})).Int("axis", 1).Error();
  EXPECT_NE(e.find("Concat cat3"), std::string::npos) << e;
  EXPECT_NE(e.find("input 1"), std::string::npos) << e;
  EXPECT_FALSE(Op("Concat").In(Iota({2, 2})).In(Iota({2, 2})).Int("axis", 2).Try().ok());
  EXPECT_FALSE(Op("Concat").In(Iota({2, 2})).In(I64({2, 2}, {1, 2, 3, 4})).Int("axis", 0).Try().ok());
}

TEST(ShapeSelectOps, SplitBySizesInputAttributeOrEqualParts) {
  TensorData x = Iota({2, 6});
  auto parts = Op("Split").In(x).In(Ints1({1, 2, 3})).Int("axis", 1).Outputs(3).RunAll();
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(Values<float>(parts[0]), (std::vector<float>{0, 6}));
  EXPECT_EQ(Values<float>(parts[1]), (std::vector<float>{1, 2, 7, 8}));
  EXPECT_EQ(Values<float>(parts[2]), (std::vector<float>{3, 4, 5, 9, 10, 11}));
  parts = Op("Split").In(x).Ints("split", {4, 2}).Int("axis", -1).Outputs(2).Opset(11).RunAll();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].type().dims, (std::vector<int64_t>{2, 2}));
  parts = Op("Split").In(x).Int("axis", 0).Outputs(2).RunAll();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(Values<float>(parts[1]), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  // Opset 18's num_outputs: the last part may be smaller.
  parts = Op("Split").In(Iota({5})).Int("num_outputs", 2).Outputs(2).Opset(18).RunAll();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(Values<float>(parts[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(Values<float>(parts[1]), (std::vector<float>{3, 4}));
  EXPECT_NE(Op("Split", "sp").In(x).In(Ints1({1, 2})).Int("axis", 1).Outputs(2).Error().find("sums to 3"),
            std::string::npos);
  EXPECT_FALSE(Op("Split").In(Iota({5})).Outputs(2).Try().ok());  // 5 does not split in 2 equal parts
}

// A slice computed element by element: count, start, step per axis.
std::vector<float> SliceReference(const TensorData& x, const std::vector<int64_t>& start,
                                  const std::vector<int64_t>& step, const std::vector<int64_t>& count) {
  std::vector<float> xs = Values<float>(x), out;
  ForEachIndex(count, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o.size());
    for (size_t a = 0; a < o.size(); ++a) i[a] = start[a] + o[a] * step[a];
    out.push_back(xs[static_cast<size_t>(Offset(x.type().dims, i))]);
  });
  return out;
}

TEST(ShapeSelectOps, SliceClampsAndStepsBothWays) {
  TensorData x = Iota({4, 10});
  // Negative starts and ends, an end past the dim, axes out of order.
  TensorData y = Op("Slice").In(x).In(Ints1({-3, 1})).In(Ints1({100, -1})).In(Ints1({1, 0})).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(y), SliceReference(x, {1, 7}, {1, 1}, {2, 3}));
  // Negative steps: from the end backwards, the INT64_MIN-style end meaning "through index 0".
  y = Op("Slice")
          .In(x)
          .In(Ints1({-1, 8}))
          .In(Ints1({INT64_MIN, 1}))
          .In(Ints1({0, 1}))
          .In(Ints1({-1, -3}))
          .Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Values<float>(y), SliceReference(x, {3, 8}, {-1, -3}, {4, 3}));
  // A start past the dim with a negative step clamps to the last element.
  y = Op("Slice").In(x).In(Ints1({20})).In(Ints1({-20})).In(Ints1({1})).In(Ints1({-4})).Run();
  EXPECT_EQ(Values<float>(y), SliceReference(x, {0, 9}, {1, -4}, {4, 3}));
  // A start before the beginning with a negative step clamps to element 0 (numpy would give nothing).
  EXPECT_EQ(Values<float>(Op("Slice")
                              .In(F32({3}, {0, 1, 2}))
                              .In(Ints1({-6}))
                              .In(Ints1({INT64_MIN}))
                              .In(Ints1({0}))
                              .In(Ints1({-1}))
                              .Run()),
            (std::vector<float>{0}));
  // Empty results.
  EXPECT_EQ(Op("Slice").In(x).In(Ints1({5})).In(Ints1({2})).In(Ints1({1})).Run().type().dims,
            (std::vector<int64_t>{4, 0}));
  // Opset 1: attributes.
  y = Op("Slice").In(x).Ints("starts", {1}).Ints("ends", {3}).Ints("axes", {0}).Opset(9).Run();
  EXPECT_EQ(Values<float>(y), SliceReference(x, {1, 0}, {1, 1}, {2, 10}));
}

// The ONNX spec's wording of Slice's clamping: a negative index counts from
// the end; then starts clamp into [0, dim] for positive steps and
// [0, dim - 1] for negative ones, ends into [0, dim] and [-1, dim - 1].
// (Python's slicing differs in one place: a start before the beginning
// with a negative step gives nothing there, one element here, as
// onnxruntime does.)
void OnnxSliceIndices(int64_t dim, int64_t step, int64_t* start, int64_t* end, int64_t* count) {
  if (*start < 0) *start += dim;
  if (*end < 0) *end += dim;
  if (step > 0) {
    *start = std::min(std::max<int64_t>(*start, 0), dim);
    *end = std::min(std::max<int64_t>(*end, 0), dim);
    *count = *end > *start ? (*end - *start - 1) / step + 1 : 0;
  } else {
    *start = std::min(std::max<int64_t>(*start, 0), dim - 1);
    *end = std::min(std::max<int64_t>(*end, -1), dim - 1);
    *count = *start > *end ? (*start - *end - 1) / (-step) + 1 : 0;
  }
}

TEST(ShapeSelectOps, SliceMatchesTheSpecOnRandomCases) {
  std::mt19937 rng(17);
  const std::vector<int64_t> ends = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                     -100, 100};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims;
    for (int a = 0; a < rank; ++a) dims.push_back(static_cast<int64_t>(rng() % 6));
    TensorData x = Iota(dims);
    std::vector<int64_t> starts, stops, axes, steps;
    std::vector<int64_t> start(dims.size(), 0), step(dims.size(), 1), count = dims;
    for (int a = 0; a < rank; ++a) {
      if (rng() % 3 == 0) continue;  // this axis is not sliced
      int64_t b = static_cast<int64_t>(rng() % 15) - 7, e = static_cast<int64_t>(rng() % 15) - 7;
      if (rng() % 4 == 0) e = ends[rng() % ends.size()];
      if (rng() % 6 == 0) b = ends[rng() % ends.size()];
      int64_t st = static_cast<int64_t>(rng() % 3) + 1;
      if (rng() % 2) st = -st;
      starts.push_back(b);
      stops.push_back(e);
      axes.push_back(rng() % 2 ? a : a - rank);
      steps.push_back(st);
      int64_t s0 = b, s1 = e, n = 0;
      if (dims[static_cast<size_t>(a)] == 0) {
        n = 0;  // nothing to clamp into
      } else {
        OnnxSliceIndices(dims[static_cast<size_t>(a)], st, &s0, &s1, &n);
      }
      start[static_cast<size_t>(a)] = s0;
      step[static_cast<size_t>(a)] = st;
      count[static_cast<size_t>(a)] = n;
    }
    if (starts.empty()) continue;
    TensorData y =
        Op("Slice").In(x).In(Ints1(starts)).In(Ints1(stops)).In(Ints1(axes)).In(Ints1(steps)).Run();
    ASSERT_EQ(y.type().dims, count) << "case " << iter << " dims " << DimsToString(dims) << " starts "
                                    << DimsToString(starts) << " ends " << DimsToString(stops) << " axes "
                                    << DimsToString(axes) << " steps " << DimsToString(steps);
    ASSERT_EQ(Values<float>(y), SliceReference(x, start, step, count)) << "case " << iter;
  }
}

TEST(ShapeSelectOps, SliceRejectsBadAxesAndZeroSteps) {
  TensorData x = Iota({4, 10});
  const std::string e = Op("Slice", "sl9").In(x).In(Ints1({0})).In(Ints1({1})).In(Ints1({2})).Error();
  EXPECT_NE(e.find("Slice sl9: axis 2 is out of range"), std::string::npos) << e;
  EXPECT_NE(
      Op("Slice").In(x).In(Ints1({0})).In(Ints1({1})).In(Ints1({0})).In(Ints1({0})).Error().find("step 0"),
      std::string::npos);
  EXPECT_NE(Op("Slice").In(x).In(Ints1({0, 0})).In(Ints1({1, 1})).In(Ints1({0, -2})).Error().find("twice"),
            std::string::npos);
}

TEST(ShapeSelectOps, GatherTakesNegativeIndicesAlongAnyAxis) {
  ThreadPool pool(2);
  TensorData x = Iota({3, 4});
  TensorData y = Op("Gather").In(x).In(I64({2}, {-1, 0})).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  y = Op("Gather").In(x).In(I32({2, 2}, {3, 1, -4, 2})).Int("axis", -1).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{3, 1, 0, 2, 7, 5, 4, 6, 11, 9, 8, 10}));
  // A scalar index drops the axis.
  y = Op("Gather").In(x).In(I64({}, {2})).Int("axis", 1).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{2, 6, 10}));
  // An embedding-style lookup along axis 0, big enough for the pool.
  TensorData table = Iota({1000, 256});
  std::vector<int64_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 1000);
  y = Op("Gather").In(table).In(I64({300}, ids)).Pool(&pool).Run();
  const std::vector<float> ys = Values<float>(y);
  bool all = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < 256; ++c)
      all = all && ys[i * 256 + static_cast<size_t>(c)] == static_cast<float>(ids[i] * 256 + c);
  }
  EXPECT_TRUE(all);
}

TEST(ShapeSelectOps, GatherIndexOutOfRangeAtRunTimeNamesNodeAndIndex) {
  // Indices computed at run time: shape inference cannot see them.
  cpu::TensorOpRun run;
  run.op_type = "Gather";
  run.node = "gather_ids";
  run.inputs.push_back(Iota({3, 4}));
  run.inputs.push_back(I64({2}, {1, 7}));
  // Through RunTensorOp the indices are constants to inference, which checks them already:
  auto r = cpu::RunTensorOp(run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gather_ids"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("index 7"), std::string::npos) << r.status().message();
  // The kernel alone, made without constants, checks at run time.
  cpu::TensorKernelArgs args;
  AttributeMap attrs;
  args.op_type = "Gather";
  args.node = "gather_ids";
  args.attrs = &attrs;
  args.inputs = {TensorType{DType::kF32, {3, 4}}, TensorType{DType::kI64, {2}}};
  args.present = {true, true};
  args.constants = {nullptr, nullptr};
  args.outputs = {TensorType{DType::kF32, {2, 4}}};
  auto kernel = cpu::MakeTensorKernel(args);
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  std::vector<float> data(12), out(8);
  const std::vector<int64_t> bad = {-4, 3}, worse = {0, -5};
  const void* ins[2] = {data.data(), bad.data()};
  void* outs[1] = {out.data()};
  cpu::TensorCall call;
  call.inputs = ins;
  call.outputs = outs;
  Status s = kernel->run(call);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Gather gather_ids: index -4"), std::string::npos) << s.message();
  ins[1] = worse.data();
  s = kernel->run(call);
  EXPECT_NE(s.message().find("index -5"), std::string::npos) << s.message();
}

TEST(ShapeSelectOps, GatherRejectsBadAxes) {
  EXPECT_NE(
      Op("Gather", "g").In(Iota({3, 4})).In(I64({1}, {0})).Int("axis", 2).Error().find("Gather g: axis 2"),
      std::string::npos);
  EXPECT_FALSE(Op("Gather").In(Iota({3, 4})).In(F32({1}, {0})).Try().ok());  // float indices
}

TEST(ShapeSelectOps, GatherElementsAndScatterElements) {
  TensorData x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorData idx = I64({2, 2}, {2, 0, -1, 1});
  TensorData y = Op("GatherElements").In(x).In(idx).Int("axis", 1).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{3, 1, 6, 5}));
  y = Op("GatherElements").In(x).In(I64({1, 3}, {1, 0, 1})).Int("axis", 0).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{4, 2, 6}));
  EXPECT_FALSE(Op("GatherElements").In(x).In(I64({2, 1}, {3, 0})).Int("axis", 1).Try().ok());

  TensorData upd = F32({2, 2}, {10, 20, 30, 40});
  y = Op("ScatterElements").In(x).In(idx).In(upd).Int("axis", 1).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{20, 2, 10, 4, 40, 30}));
  // Reductions accumulate repeated indices.
  TensorData rep = I64({1, 3}, {1, 1, 0});
  TensorData ones = F32({1, 3}, {1, 2, 3});
  y = Op("ScatterElements").In(x).In(rep).In(ones).Int("axis", 1).Str("reduction", "add").Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{4, 5, 3, 4, 5, 6}));
  y = Op("ScatterElements").In(x).In(rep).In(ones).Int("axis", 1).Str("reduction", "mul").Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{3, 4, 3, 4, 5, 6}));
  // Scatter is opset 9-10's name.
  y = Op("Scatter").In(x).In(idx).In(upd).Int("axis", 1).Opset(10).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{20, 2, 10, 4, 40, 30}));
}

TEST(ShapeSelectOps, GatherNDWithBatchDimsAndScatterNDReductions) {
  TensorData x = Iota({2, 2, 3});
  // Whole rows: indices [2, 2] -> [2, 3].
  TensorData y = Op("GatherND").In(x).In(I64({2, 2}, {1, 0, 0, -1})).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{6, 7, 8, 3, 4, 5}));
  // batch_dims 1: per batch, a (row, col) pair.
  y = Op("GatherND").In(x).In(I64({2, 2}, {1, 2, 0, 1})).Int("batch_dims", 1).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{5, 7}));
  EXPECT_FALSE(Op("GatherND").In(x).In(I64({1, 4}, {0, 0, 0, 0})).Try().ok());

  TensorData data = F32({4}, {1, 2, 3, 4});
  TensorData idx = I64({3, 1}, {3, 1, 3});
  TensorData upd = F32({3}, {10, 20, 30});
  EXPECT_EQ(Values<float>(Op("ScatterND").In(data).In(I64({2, 1}, {3, 1})).In(F32({2}, {10, 20})).Run()),
            (std::vector<float>{1, 20, 3, 10}));
  EXPECT_EQ(Values<float>(Op("ScatterND").In(data).In(idx).In(upd).Str("reduction", "add").Run()),
            (std::vector<float>{1, 22, 3, 44}));
  EXPECT_EQ(Values<float>(Op("ScatterND").In(data).In(idx).In(upd).Str("reduction", "mul").Run()),
            (std::vector<float>{1, 40, 3, 1200}));
  EXPECT_NE(Op("ScatterND", "sc").In(data).In(I64({1, 1}, {4})).In(F32({1}, {0})).Error().find("index 4"),
            std::string::npos);
}

TEST(ShapeSelectOps, PadConstantReflectEdgeAndCrop) {
  TensorData x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorData y = Op("Pad").In(x).In(Ints1({1, 0, 0, 2})).In(F32({}, {9})).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(Values<float>(y), (std::vector<float>{9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9}));
  y = Op("Pad").In(x).In(Ints1({0, 2, 0, 1})).Str("mode", "reflect").Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  y = Op("Pad").In(x).In(Ints1({1, 1, 0, 0})).Str("mode", "edge").Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{1, 1, 2, 3, 1, 1, 2, 3, 4, 4, 5, 6}));
  // Negative pads crop; the default fill is 0.
  y = Op("Pad").In(x).In(Ints1({0, -1, 1, 0})).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{2, 3, 5, 6, 0, 0}));
  // Before opset 11: pads and value attributes.
  y = Op("Pad").In(x).Ints("pads", {0, 1, 0, 0}).Float("value", -1).Opset(2).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{-1, 1, 2, 3, -1, 4, 5, 6}));
  // Opset 18: axes.
  y = Op("Pad").In(x).In(Ints1({1, 1})).Absent().In(Ints1({-1})).Opset(18).Run();
  EXPECT_EQ(Values<float>(y), (std::vector<float>{0, 1, 2, 3, 0, 0, 4, 5, 6, 0}));
  // int64 data with its own fill.
  y = Op("Pad").In(I64({2}, {7, 8})).In(Ints1({1, 1})).In(I64({}, {-3})).Run();
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{-3, 7, 8, -3}));
  EXPECT_NE(Op("Pad", "p").In(x).In(Ints1({0, -4, 0, 0})).Error().find("Pad p"), std::string::npos);
  EXPECT_FALSE(Op("Pad").In(x).In(Ints1({0, 1})).Try().ok());
}

TEST(ShapeSelectOps, NonZeroRunsOnCompileTimeInputsOnly) {
  TensorData x = F32({2, 3}, {0, 1, 0, 2, 0, 3});
  TensorData y = Op("NonZero").In(x).Run();
  EXPECT_EQ(y.type().dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>(y), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  ShapeContext ctx;
  AttributeMap attrs;
  ctx.op_type = "NonZero";
  ctx.node = "nz";
  ctx.attrs = &attrs;
  ctx.inputs.push_back(TensorOpInput{&x.type(), nullptr});
  auto r = InferTensorOp(ctx);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NonZero nz"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("run time"), std::string::npos) << r.status().message();
}

}  // namespace shape_select_ops_tests
}  // namespace kiln
