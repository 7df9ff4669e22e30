// The roofline: loops give positive finite rates (no timing is asserted),
// figures round-trip through JSON and the cache, and the peaks other modes
// use are chosen as documented.
#include "bench/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "bench/roofline_loops.h"
#include "core/cpu_info.h"
#include "testing/test_paths.h"

namespace kiln::bench {
namespace roofline_tests {

RooflineOptions Quick() {
  RooflineOptions o;
  o.thread_counts = {1};
  o.repetitions = 1;
  o.seconds_per_repetition = 0.005;
  o.buffer_bytes = 4 << 20;
  return o;
}

TEST(RooflineLoops, EveryLoopReturnsAFiniteChecksum) {
  LoopSet set = LoopsForThisCpu();
  ASSERT_FALSE(set.loops.empty());
  EXPECT_EQ(set.loops.front().name, "fp32_fma");
  for (const ComputeLoop& loop : set.loops) {
    EXPECT_GT(loop.ops_per_iteration, 0) << loop.name;
    EXPECT_TRUE(std::isfinite(loop.run(1000))) << loop.name;
    EXPECT_FALSE(loop.instructions.empty()) << loop.name;
  }
  // bf16 and int8 dot products are either measured or said to be missing.
  for (const char* name : {"bf16_dot", "int8_dot"}) {
    bool measured = false, missing = false;
    for (const ComputeLoop& l : set.loops) measured = measured || l.name == name;
    for (const UnsupportedLoop& u : set.unsupported) {
      if (u.name == name) {
        missing = true;
        EXPECT_NE(u.reason.find("not supported on this CPU"), std::string::npos);
      }
    }
    EXPECT_NE(measured, missing) << name;
  }
  alignas(64) static float data[1024];
  for (int i = 0; i < 1024; ++i) data[i] = 1.0f;
  EXPECT_FLOAT_EQ(static_cast<float>(set.stream_read(data, sizeof(data))), 1024.0f);
}

TEST(MeasureRoofline, PositiveFiniteFigures) {
  RooflineOptions o = Quick();
  o.repetitions = 2;
  auto r = MeasureRoofline(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->cpu_model.empty());
  EXPECT_EQ(r->isa, RooflineIsaLevel());
  EXPECT_EQ(r->isa.rfind(GetCpuInfo().BestIsa(), 0), 0u);
  ASSERT_EQ(r->rows.size(), 1u);
  const RooflineRow& row = r->rows[0];
  EXPECT_EQ(row.threads, 1);
  ASSERT_NE(row.Find("fp32_fma"), nullptr);
  for (const ComputeFigure& f : row.compute) {
    if (!f.supported) {
      EXPECT_FALSE(f.note.empty()) << f.name;
      continue;
    }
    EXPECT_GT(f.per_second, 0) << f.name;
    EXPECT_TRUE(std::isfinite(f.per_second)) << f.name;
    // At least the asked repetitions, at most 8x as many (until settled);
    // the limit is the fastest of them.
    EXPECT_GE(f.repetitions.count, 2) << f.name;
    EXPECT_LE(f.repetitions.count, 16) << f.name;
    EXPECT_EQ(f.per_second, f.repetitions.max) << f.name;
  }
  ASSERT_EQ(row.bandwidth.size(), 2u);
  EXPECT_EQ(row.bandwidth[0].pages, "4k");
  EXPECT_EQ(row.bandwidth[1].pages, "thp");
  for (const BandwidthFigure& b : row.bandwidth) {
    EXPECT_GT(b.bytes_per_s, 0);
    EXPECT_TRUE(std::isfinite(b.bytes_per_s));
    EXPECT_GE(b.repetitions.count, 2);
    EXPECT_EQ(b.bytes_per_s, b.repetitions.max);
    EXPECT_EQ(b.buffer_bytes, 4 << 20);
    EXPECT_GE(b.huge_page_bytes, 0);
  }
  EXPECT_EQ(row.bandwidth[0].huge_page_bytes, 0);
  EXPECT_NE(row.BestBandwidth(), nullptr);
  const std::string table = FormatRooflineTable(*r);
  EXPECT_NE(table.find("fp32_fma"), std::string::npos);
  EXPECT_NE(table.find("read_thp"), std::string::npos);
  EXPECT_NE(table.find("Peaks the other modes compare with"), std::string::npos);
}

TEST(MeasureRoofline, RejectsBadOptions) {
  RooflineOptions o = Quick();
  o.thread_counts = {0};
  EXPECT_FALSE(MeasureRoofline(o).ok());
  o = Quick();
  o.repetitions = 0;
  EXPECT_FALSE(MeasureRoofline(o).ok());
  o = Quick();
  o.buffer_bytes = 1024;
  EXPECT_FALSE(MeasureRoofline(o).ok());
  o = Quick();
  o.seconds_per_repetition = 0;
  EXPECT_FALSE(MeasureRoofline(o).ok());
}

Roofline Synthetic(int threads, bool bf16_dot, bool int8_dot) {
  Roofline r;
  const CpuInfo& cpu = GetCpuInfo();
  r.cpu_model = cpu.model_name.empty() ? cpu.vendor : cpu.model_name;
  r.isa = RooflineIsaLevel();
  RooflineRow row;
  row.threads = threads;
  auto add = [&](const char* name, double rate, bool supported) {
    ComputeFigure f;
    f.name = name;
    f.unit = "FLOP/s";
    f.supported = supported;
    f.per_second = supported ? rate : 0;
    if (!supported) f.note = "not supported on this CPU";
    row.compute.push_back(f);
  };
  add("fp32_fma", 100e9 * threads, true);
  add("bf16_dot", 400e9 * threads, bf16_dot);
  add("int8_dot", 800e9 * threads, int8_dot);
  add("bf16_widen_fma", 70e9 * threads, true);
  add("int8_madd", 200e9 * threads, true);
  BandwidthFigure small, huge;
  small.pages = "4k";
  small.bytes_per_s = 20e9;
  huge.pages = "thp";
  huge.bytes_per_s = 25e9;
  huge.huge_page_bytes = 1 << 30;
  row.bandwidth = {small, huge};
  r.rows.push_back(row);
  return r;
}

TEST(PeakChoice, FollowsWhatTheCpuHas) {
  const Roofline without = Synthetic(2, false, false);
  const RooflineRow& row = without.rows[0];
  EXPECT_EQ(ComputePeak(row, WeightArithmetic::kFp32).per_second, 200e9);
  PeakChoice bf16 = ComputePeak(row, WeightArithmetic::kBf16);
  EXPECT_EQ(bf16.per_second, 200e9);  // widened to fp32
  EXPECT_NE(bf16.figure.find("fp32_fma"), std::string::npos);
  EXPECT_NE(bf16.reason.find("widened bf16"), std::string::npos);
  EXPECT_EQ(ComputePeak(row, WeightArithmetic::kF16).per_second, 200e9);
  PeakChoice int8 = ComputePeak(row, WeightArithmetic::kInt8);
  EXPECT_EQ(int8.per_second, 400e9);
  EXPECT_NE(int8.figure.find("int8_madd"), std::string::npos);
  PeakChoice bw = BandwidthPeak(row);
  EXPECT_EQ(bw.per_second, 25e9);
  EXPECT_NE(bw.figure.find("thp"), std::string::npos);

  const Roofline with = Synthetic(2, true, true);
  EXPECT_EQ(ComputePeak(with.rows[0], WeightArithmetic::kBf16).per_second, 800e9);
  EXPECT_EQ(ComputePeak(with.rows[0], WeightArithmetic::kInt8).per_second, 1600e9);
}

// The peak is the fastest unit that can do the math, not the one the
// kernels happen to use: the AMX tiles where they are measured, the fp32
// FMA units when vdpbf16ps is slower than them (as on CPUs that run it at
// half their FMA rate).
TEST(PeakChoice, IsTheFastestUnitThatCanDoTheMath) {
  Roofline r = Synthetic(2, true, true);
  RooflineRow& row = r.rows[0];
  for (ComputeFigure& f : row.compute) {
    if (f.name == "bf16_dot") f.per_second = 150e9;  // half the FMA rate
  }
  PeakChoice bf16 = ComputePeak(row, WeightArithmetic::kBf16);
  EXPECT_EQ(bf16.per_second, 200e9);
  EXPECT_NE(bf16.figure.find("fp32_fma"), std::string::npos);
  EXPECT_NE(bf16.reason.find("faster than bf16_dot"), std::string::npos);

  auto add = [&](const char* name, double rate, const char* unit) {
    ComputeFigure f;
    f.name = name;
    f.unit = unit;
    f.per_second = rate;
    row.compute.push_back(f);
  };
  add("amx_bf16", 7.68e12, "FLOP/s");
  add("amx_int8", 15.36e12, "OP/s");
  PeakChoice tiles = ComputePeak(row, WeightArithmetic::kBf16);
  EXPECT_EQ(tiles.per_second, 7.68e12);
  EXPECT_NE(tiles.figure.find("amx_bf16"), std::string::npos);
  EXPECT_NE(tiles.reason.find("AMX"), std::string::npos);
  EXPECT_EQ(ComputePeak(row, WeightArithmetic::kInt8).per_second, 15.36e12);
  // f16 weights have no tile unit here: the FMA units on widened values
  // are their limit.
  EXPECT_EQ(ComputePeak(row, WeightArithmetic::kF16).per_second, 200e9);
  EXPECT_EQ(ComputePeak(row, WeightArithmetic::kFp32).per_second, 200e9);

  RooflineRow empty;
  EXPECT_EQ(ComputePeak(empty, WeightArithmetic::kFp32).per_second, 0);
  EXPECT_EQ(BandwidthPeak(empty).per_second, 0);
}

TEST(RooflineJson, RoundTrips) {
  Roofline r = Synthetic(1, false, true);
  r.measured_at = "2025-01-01T00:00:00Z";
  r.repetitions = 5;
  r.rows[0].compute[0].contention.valid = true;
  r.rows[0].compute[0].contention.other_cores = 0.5;
  auto back = Roofline::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cpu_model, r.cpu_model);
  EXPECT_EQ(back->measured_at, r.measured_at);
  EXPECT_EQ(back->repetitions, 5);
  ASSERT_EQ(back->rows.size(), 1u);
  ASSERT_EQ(back->rows[0].compute.size(), r.rows[0].compute.size());
  EXPECT_EQ(back->rows[0].compute[0].per_second, 100e9);
  EXPECT_TRUE(back->rows[0].compute[0].contention.contended());
  EXPECT_FALSE(back->rows[0].compute[1].supported);
  EXPECT_EQ(back->rows[0].bandwidth[1].huge_page_bytes, 1 << 30);
}

TEST(RooflineJson, RejectsWrongShapes) {
  EXPECT_FALSE(Roofline::FromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(Roofline::FromJson({{"rows", 3}}).ok());
  EXPECT_FALSE(Roofline::FromJson({{"rows", {{{"threads", "two"}}}}}).ok());
  EXPECT_FALSE(Roofline::FromJson({{"rows", {{{"threads", 1}, {"compute", {3}}}}}}).ok());
}

TEST(RooflineCache, SavesMergesAndLoads) {
  const std::string path = testing::MakeTempDir() + "/sub/roofline.json";
  EXPECT_EQ(LoadRooflineCache(path, 1).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(SaveRooflineCache(path, Synthetic(1, false, false)).ok());
  ASSERT_TRUE(SaveRooflineCache(path, Synthetic(2, false, false)).ok());
  auto one = LoadRooflineCache(path, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->rows[0].threads, 1);
  EXPECT_EQ(one->rows[0].Find("fp32_fma")->per_second, 100e9);
  auto two = LoadRooflineCache(path, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->rows[0].Find("fp32_fma")->per_second, 200e9);
  EXPECT_EQ(LoadRooflineCache(path, 3).status().code(), StatusCode::kNotFound);

  // A new measurement replaces the entry of the same thread count.
  Roofline again = Synthetic(1, false, false);
  again.rows[0].compute[0].per_second = 123e9;
  ASSERT_TRUE(SaveRooflineCache(path, again).ok());
  EXPECT_EQ(LoadRooflineCache(path, 1)->rows[0].Find("fp32_fma")->per_second, 123e9);
  EXPECT_TRUE(LoadRooflineCache(path, 2).ok());
}

TEST(RooflineCache, FreshMeasurementReplacesTheCachedRow) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/roofline.json";
  Roofline stale = Synthetic(1, false, false);
  stale.measured_at = "2000-01-01T00:00:00Z";
  stale.rows[0].compute[0].per_second = 1.0;
  ASSERT_TRUE(SaveRooflineCache(path, stale).ok());
  // Loading keeps the stale row; measuring afresh replaces it.
  EXPECT_EQ(LoadOrMeasureRoofline(path, 1, nullptr)->measured_at, stale.measured_at);
  auto fresh = MeasureAndCacheRoofline(path, Quick());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fresh->measured_at, stale.measured_at);
  auto loaded = LoadRooflineCache(path, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->measured_at, fresh->measured_at);
  EXPECT_EQ(loaded->rows[0].Find("fp32_fma")->per_second, fresh->rows[0].Find("fp32_fma")->per_second);
  EXPECT_NE(loaded->rows[0].Find("fp32_fma")->per_second, 1.0);

  // A cache that cannot be written still yields the measurement, and says so.
  std::ofstream(dir + "/a_file") << "x";
  RooflineOptions o = Quick();
  std::string said;
  o.on_progress = [&](const std::string& line) { said += line + "\n"; };
  auto unsaved = MeasureAndCacheRoofline(dir + "/a_file/roofline.json", o);
  ASSERT_TRUE(unsaved.ok()) << unsaved.status().ToString();
  EXPECT_NE(said.find("not cached"), std::string::npos) << said;
}

TEST(RooflineCache, CorruptFilesAreErrorsNamingThePath) {
  const std::string path = testing::MakeTempDir() + "/roofline.json";
  std::ofstream(path) << "{not json";
  auto loaded = LoadRooflineCache(path, 1);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(loaded.status().message().find(path), std::string::npos);
  // Saving over a corrupt cache replaces it.
  ASSERT_TRUE(SaveRooflineCache(path, Synthetic(1, false, false)).ok());
  EXPECT_TRUE(LoadRooflineCache(path, 1).ok());
}

TEST(FormatRate, EngineeringUnits) {
  EXPECT_EQ(FormatRate(48.04e9, "FLOP/s"), "48.0 GFLOP/s");
  EXPECT_EQ(FormatRate(1.5e12, "OP/s"), "1.50 TOP/s");
  EXPECT_EQ(FormatRate(9.634e9, "B/s"), "9.63 GB/s");
  EXPECT_EQ(FormatRate(512e6, "B/s"), "512.0 MB/s");
}

}  // namespace roofline_tests
}  // namespace kiln::bench
