// Resize and Upsample against a direct N-d reference written here: each
// output point's source coordinate per axis, then the nearest element or
// the product-weighted sum over all 2^rank (linear) or 4^rank (cubic)
// neighbours, where the kernel makes one separable pass per axis.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "core/half.h"
#include "core/thread_pool.h"
#include "unit/tensor_ops/shape_op_test_util.h"

namespace kiln {
namespace shape_resize_tests {

using namespace shape_test;

struct RefResize {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  std::vector<double> scales;  // per axis
  std::vector<double> roi;     // 2 x rank, tf_crop_and_resize only
};

double SourceCoordinate(const RefResize& r, size_t axis, double x, double in_len, double out_len) {
  const double s = r.scales[axis];
  if (r.coord == "half_pixel") return (x + 0.5) / s - 0.5;
  if (r.coord == "pytorch_half_pixel") return out_len > 1 ? (x + 0.5) / s - 0.5 : 0;
  if (r.coord == "align_corners") return out_len == 1 ? 0 : x * (in_len - 1) / (out_len - 1);
  if (r.coord == "asymmetric") return x / s;
  if (r.coord == "tf_half_pixel_for_nn") return (x + 0.5) / s;
  // tf_crop_and_resize
  const size_t rank = r.scales.size();
  const double start = r.roi[axis], end = r.roi[axis + rank];
  return out_len > 1 ? start * (in_len - 1) + x * (end - start) * (in_len - 1) / (out_len - 1)
                     : 0.5 * (start + end) * (in_len - 1);
}

double CubicKernel(double a, double d) {  // Keys' kernel at distance d
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

std::vector<float> Reference(const TensorData& x, const std::vector<int64_t>& out_dims, const RefResize& r) {
  const std::vector<int64_t>& in = x.type().dims;
  const std::vector<float> xs = Values<float>(x);
  const size_t rank = in.size();
  std::vector<float> out;
  ForEachIndex(out_dims, [&](const std::vector<int64_t>& o) {
    std::vector<double> c(rank);
    bool outside = false;
    for (size_t a = 0; a < rank; ++a) {
      c[a] = SourceCoordinate(r, a, static_cast<double>(o[a]), static_cast<double>(in[a]),
                              static_cast<double>(out_dims[a]));
      if (r.coord == "tf_crop_and_resize" && (c[a] < 0 || c[a] > static_cast<double>(in[a] - 1)))
        outside = true;
    }
    if (outside) {
      out.push_back(static_cast<float>(r.extrapolation));
      return;
    }
    const auto clampi = [&](int64_t i, size_t a) {
      return std::min<int64_t>(std::max<int64_t>(i, 0), in[a] - 1);
    };
    if (r.mode == "nearest") {
      std::vector<int64_t> i(rank);
      for (size_t a = 0; a < rank; ++a) {
        const double f = std::floor(c[a]);
        int64_t v;
        if (r.nearest == "floor") {
          v = static_cast<int64_t>(f);
        } else if (r.nearest == "ceil") {
          v = static_cast<int64_t>(std::ceil(c[a]));
        } else if (c[a] - f == 0.5) {
          v = static_cast<int64_t>(r.nearest == "round_prefer_ceil" ? f + 1 : f);
        } else {
          v = static_cast<int64_t>(std::round(c[a]));
        }
        i[a] = clampi(v, a);
      }
      out.push_back(xs[static_cast<size_t>(Offset(in, i))]);
      return;
    }
    // Every combination of per-axis taps.
    const int taps = r.mode == "linear" ? 2 : 4;
    std::vector<std::vector<std::pair<int64_t, double>>> axis_taps(rank);
    for (size_t a = 0; a < rank; ++a) {
      if (r.mode == "linear") {
        const double cc = std::min(std::max(c[a], 0.0), static_cast<double>(in[a] - 1));
        const auto i0 = static_cast<int64_t>(std::floor(cc));
        const double t = cc - static_cast<double>(i0);
        axis_taps[a] = {{clampi(i0, a), 1 - t}, {clampi(i0 + 1, a), t}};
      } else {
        const double f = std::floor(c[a]);
        double sum = 0;
        for (int k = -1; k <= 2; ++k) {
          const auto i = static_cast<int64_t>(f) + k;
          double w = CubicKernel(r.a, c[a] - static_cast<double>(i));
          if (r.exclude_outside && (i < 0 || i >= in[a])) w = 0;
          axis_taps[a].push_back({clampi(i, a), w});
          sum += w;
        }
        if (r.exclude_outside) {
          for (auto& tw : axis_taps[a]) tw.second /= sum;
        }
      }
    }
    double acc = 0;
    std::vector<int64_t> pick(rank, 0);
    const int64_t combos = static_cast<int64_t>(std::pow(taps, static_cast<double>(rank)));
    for (int64_t k = 0; k < combos; ++k) {
      int64_t rest = k;
      double w = 1;
      std::vector<int64_t> i(rank);
      for (size_t a = 0; a < rank; ++a) {
        const auto& [idx, wt] = axis_taps[a][static_cast<size_t>(rest % taps)];
        rest /= taps;
        i[a] = idx;
        w *= wt;
      }
      acc += w * xs[static_cast<size_t>(Offset(in, i))];
    }
    out.push_back(static_cast<float>(acc));
  });
  return out;
}

TensorData RandomF32(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(static_cast<size_t>(Count(dims)));
  for (float& f : v) f = u(rng);
  return F32(std::move(dims), v);
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 * std::max(1.0f, std::fabs(want[i]))) << what << " element " << i;
  }
}

TEST(ShapeResize, EveryModeAndCoordinateTransformMatchesTheReference) {
  TensorData x = RandomF32({1, 2, 5, 7}, 1);
  const std::vector<std::vector<double>> scale_sets = {{1, 1, 2, 2}, {1, 1, 0.6, 1.5}, {1, 1, 3, 0.5}};
  for (const std::string mode : {"nearest", "linear", "cubic"}) {
    for (const std::string coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
      for (const auto& scales : scale_sets) {
        RefResize r;
        r.mode = mode;
        r.coord = coord;
        r.scales = scales;
        std::vector<int64_t> out_dims;
        for (size_t a = 0; a < 4; ++a) {
          out_dims.push_back(static_cast<int64_t>(
              std::floor(static_cast<double>(x.type().dims[a]) * static_cast<float>(scales[a]))));
        }
        std::vector<float> sf(scales.begin(), scales.end());
        TensorData y = Op("Resize")
                           .In(x)
                           .Absent()
                           .In(F32({4}, sf))
                           .Str("mode", mode)
                           .Str("coordinate_transformation_mode", coord)
                           .Run();
        ASSERT_EQ(y.type().dims, out_dims);
        // align_corners and output lengths use the integer output size (onnxruntime's choice).
        ExpectNear(Values<float>(y), Reference(x, out_dims, r), mode + " " + coord);
      }
    }
  }
}

TEST(ShapeResize, NearestRoundingModesAndTfHalfPixel) {
  TensorData x = RandomF32({1, 1, 4, 6}, 2);
  for (const std::string nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const std::string coord : {"half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn"}) {
      RefResize r;
      r.nearest = nearest;
      r.coord = coord;
      // sizes input: scales are out / in.
      const std::vector<int64_t> sizes = {1, 1, 7, 3};
      for (size_t a = 0; a < 4; ++a) {
        r.scales.push_back(static_cast<float>(sizes[a]) / static_cast<float>(x.type().dims[a]));
      }
      TensorData y = Op("Resize")
                         .In(x)
                         .Absent()
                         .Absent()
                         .In(Ints1(sizes))
                         .Str("nearest_mode", nearest)
                         .Str("coordinate_transformation_mode", coord)
                         .Run();
      ExpectNear(Values<float>(y), Reference(x, sizes, r), nearest + " " + coord);
    }
  }
}

TEST(ShapeResize, CubicExcludeOutsideAndCoefficient) {
  TensorData x = RandomF32({1, 1, 6, 5}, 3);
  RefResize r;
  r.mode = "cubic";
  r.a = -0.5;
  r.exclude_outside = true;
  r.scales = {1, 1, 0.8f, 1.7f};
  TensorData y = Op("Resize")
                     .In(x)
                     .Absent()
                     .In(F32({4}, {1, 1, 0.8f, 1.7f}))
                     .Str("mode", "cubic")
                     .Float("cubic_coeff_a", -0.5)
                     .Int("exclude_outside", 1)
                     .Run();
  ExpectNear(Values<float>(y), Reference(x, y.type().dims, r), "cubic exclude_outside");
}

TEST(ShapeResize, TfCropAndResizeExtrapolates) {
  TensorData x = RandomF32({1, 1, 5, 5}, 4);
  for (const std::string mode : {"nearest", "linear"}) {
    RefResize r;
    r.mode = mode;
    r.coord = "tf_crop_and_resize";
    r.extrapolation = 10;
    r.roi = {0, 0, -0.2f, 0.4f, 1, 1, 0.6f, 1.3f};
    const std::vector<int64_t> sizes = {1, 1, 4, 6};
    for (size_t a = 0; a < 4; ++a) r.scales.push_back(static_cast<float>(sizes[a]) / 5.0f);
    r.scales[0] = r.scales[1] = 1;
    std::vector<float> roi(r.roi.begin(), r.roi.end());
    TensorData y = Op("Resize")
                       .In(x)
                       .In(F32({8}, roi))
                       .Absent()
                       .In(Ints1(sizes))
                       .Str("mode", mode)
                       .Str("coordinate_transformation_mode", "tf_crop_and_resize")
                       .Float("extrapolation_value", 10)
                       .Run();
    ExpectNear(Values<float>(y), Reference(x, sizes, r), mode + " crop");
  }
}

TEST(ShapeResize, NearestTwoTimesUpsampleOfBytesOverThePool) {
  // YOLO's upsample: nearest, asymmetric, floor, on a tensor big enough to split; u8 moves like f32.
  ThreadPool pool(2);
  const std::vector<int64_t> dims = {1, 32, 40, 40};
  std::vector<uint8_t> bytes(static_cast<size_t>(Count(dims)));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 7);
  TensorData x = TensorData::FromValues<uint8_t>(DType::kU8, dims, bytes);
  TensorData y = Op("Resize")
                     .In(x)
                     .Absent()
                     .In(F32({4}, {1, 1, 2, 2}))
                     .Str("coordinate_transformation_mode", "asymmetric")
                     .Str("nearest_mode", "floor")
                     .Pool(&pool)
                     .Run();
  ASSERT_EQ(y.type().dims, (std::vector<int64_t>{1, 32, 80, 80}));
  const std::vector<uint8_t> ys = Values<uint8_t>(y);
  bool same = true;
  ForEachIndex(y.type().dims, [&](const std::vector<int64_t>& o) {
    same = same && ys[static_cast<size_t>(Offset(y.type().dims, o))] ==
                       bytes[static_cast<size_t>(Offset(dims, {0, o[1], o[2] / 2, o[3] / 2}))];
  });
  EXPECT_TRUE(same);
}

TEST(ShapeResize, UpsampleAndResizeTenUseAsymmetricTruncation) {
  TensorData x = RandomF32({1, 1, 3, 4}, 5);
  RefResize r;
  r.coord = "asymmetric";
  r.nearest = "floor";
  r.scales = {1, 1, 2, 1.5};
  const std::vector<int64_t> out = {1, 1, 6, 6};
  const std::vector<float> want = Reference(x, out, r);
  // Upsample-7: scales attribute; Upsample-9: scales input; Resize-10: (X, scales).
  ExpectNear(Values<float>(Op("Upsample").In(x).Floats("scales", {1, 1, 2, 1.5}).Opset(7).Run()), want,
             "Upsample-7");
  ExpectNear(Values<float>(Op("Upsample").In(x).In(F32({4}, {1, 1, 2, 1.5})).Opset(9).Run()), want,
             "Upsample-9");
  ExpectNear(Values<float>(Op("Resize").In(x).In(F32({4}, {1, 1, 2, 1.5})).Opset(10).Run()), want,
             "Resize-10");
  RefResize lin = r;
  lin.mode = "linear";
  ExpectNear(
      Values<float>(Op("Upsample").In(x).In(F32({4}, {1, 1, 2, 1.5})).Str("mode", "linear").Opset(9).Run()),
      Reference(x, out, lin), "Upsample-9 linear");
}

TEST(ShapeResize, EmptyOutputsAndInputs) {
  // Scales that floor an axis to 0, in every mode; and an empty batch.
  for (const std::string mode : {"nearest", "linear", "cubic"}) {
    TensorData y = Op("Resize")
                       .In(RandomF32({1, 1, 2, 3}, 7))
                       .Absent()
                       .In(F32({4}, {1, 1, 0.4f, 2}))
                       .Str("mode", mode)
                       .Run();
    EXPECT_EQ(y.type().dims, (std::vector<int64_t>{1, 1, 0, 6})) << mode;
    y = Op("Resize").In(F32({0, 1, 2, 3}, {})).Absent().In(F32({4}, {1, 1, 2, 2})).Str("mode", mode).Run();
    EXPECT_EQ(y.type().dims, (std::vector<int64_t>{0, 1, 4, 6})) << mode;
  }
}

TEST(ShapeResize, HalfPrecisionInterpolatesInF32) {
  // The f16 input's values in f32; the f16 result must be the f32 result rounded.
  TensorData x32 = RandomF32({1, 2, 3, 5}, 8);
  std::vector<uint16_t> h;
  std::vector<float> rounded;
  for (float v : Values<float>(x32)) {
    h.push_back(F32ToF16(v));
    rounded.push_back(F16ToF32(h.back()));
  }
  TensorData x16 = TensorData::FromValues<uint16_t>(DType::kF16, {1, 2, 3, 5}, h);
  for (const std::string mode : {"linear", "cubic"}) {
    TensorData y16 = Op("Resize").In(x16).Absent().In(F32({4}, {1, 1, 2, 1.5f})).Str("mode", mode).Run();
    TensorData y32 = Op("Resize")
                         .In(F32({1, 2, 3, 5}, rounded))
                         .Absent()
                         .In(F32({4}, {1, 1, 2, 1.5f}))
                         .Str("mode", mode)
                         .Run();
    ASSERT_EQ(y16.type(), (TensorType{DType::kF16, {1, 2, 6, 7}}));
    std::vector<uint16_t> want;
    for (float v : Values<float>(y32)) want.push_back(F32ToF16(v));
    EXPECT_EQ(Values<uint16_t>(y16), want) << mode;
  }
}

TEST(ShapeResize, RefusesWhatItDoesNotDo) {
  TensorData x = RandomF32({1, 1, 4, 4}, 6);
  const std::string anti = Op("Resize", "rs")
                               .In(x)
                               .Absent()
                               .In(F32({4}, {1, 1, 0.5, 0.5}))
                               .Str("mode", "linear")
                               .Int("antialias", 1)
                               .Error();
  EXPECT_NE(anti.find("Resize rs: antialias"), std::string::npos) << anti;
  EXPECT_NE(Op("Resize")
                .In(x)
                .Absent()
                .In(F32({4}, {1, 1, 2, 2}))
                .In(Ints1({1, 1, 8, 8}))
                .Error()
                .find("exactly one of scales and sizes"),
            std::string::npos);
  EXPECT_FALSE(Op("Resize").In(x).Absent().In(F32({3}, {1, 2, 2})).Try().ok());
  EXPECT_FALSE(Op("Resize").In(x).Absent().In(F32({4}, {1, 1, 2, 2})).Str("mode", "area").Try().ok());
  // Linear on int64 is refused by the kernel, clearly.
  const std::string dtype = Op("Resize")
                                .In(I64({1, 1, 1, 2}, {1, 2}))
                                .Absent()
                                .In(F32({4}, {1, 1, 1, 2}))
                                .Str("mode", "linear")
                                .Error();
  EXPECT_NE(dtype.find("i64"), std::string::npos) << dtype;
}

}  // namespace shape_resize_tests
}  // namespace kiln
