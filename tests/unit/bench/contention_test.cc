// The contention sampler's parsers on sample /proc text, its arithmetic on
// synthetic snapshots, and the live sampler's readings.
#include "bench/contention.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace kiln::bench {
namespace contention_tests {

constexpr const char* kProcStat =
    "cpu  10132153 290696 3084719 46828483 16683 0 25195 175628 0 0\n"
    "cpu0 1393280 32966 572056 13343292 6130 0 17875 87814 0 0\n"
    "cpu1 1335934 29228 540474 13341596 5307 0 4281 87814 0 0\n"
    "intr 1462898 21 0 0\n"
    "ctxt 1990473\n"
    "btime 1062191376\n";

TEST(ParseProcStat, SumsTheAggregateLine) {
  auto t = ParseProcStat(kProcStat);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // user nice system idle iowait irq softirq steal (guest fields excluded).
  const uint64_t total = 10132153ULL + 290696 + 3084719 + 46828483 + 16683 + 0 + 25195 + 175628;
  EXPECT_EQ(t->total, total);
  EXPECT_EQ(t->idle, 46828483ULL + 16683);
  EXPECT_EQ(t->busy(), total - 46828483ULL - 16683);
  EXPECT_EQ(CountCpus(kProcStat), 2);
}

TEST(ParseProcStat, GuestTimeIsNotCountedTwice) {
  auto t = ParseProcStat("cpu  100 0 0 900 0 0 0 0 50 0\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->total, 1000u);
}

TEST(ParseProcStat, OldKernelsWithFourFields) {
  auto t = ParseProcStat("cpu 1 2 3 4\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->total, 10u);
  EXPECT_EQ(t->idle, 4u);
}

TEST(ParseProcStat, RejectsMalformedText) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4\n").ok());      // no aggregate line
  EXPECT_FALSE(ParseProcStat("cpu  1 2 x 4\n").ok());      // too few numbers
  EXPECT_FALSE(ParseProcStat("intr 1 2 3\ncpu  1\n").ok());
  EXPECT_EQ(CountCpus("garbage"), 0);
}

TEST(ParseProcessCpuTicks, ReadsUtimePlusStime) {
  // Fields after the command: state ppid pgrp session tty tpgid flags
  // minflt cminflt majflt cmajflt utime stime ...
  auto ticks = ParseProcessCpuTicks("4242 (kiln) R 1 4242 4242 0 -1 4194304 100 0 0 0 1234 56 0 0 20 0 3 0\n");
  ASSERT_TRUE(ticks.ok()) << ticks.status().ToString();
  EXPECT_EQ(*ticks, 1290u);
}

TEST(ParseProcessCpuTicks, CommandNamesWithSpacesAndParentheses) {
  auto ticks = ParseProcessCpuTicks("7 (a (weird) name) S 1 7 7 0 -1 0 0 0 0 0 10 5 0 0 20 0 1 0\n");
  ASSERT_TRUE(ticks.ok()) << ticks.status().ToString();
  EXPECT_EQ(*ticks, 15u);
}

TEST(ParseProcessCpuTicks, RejectsMalformedText) {
  EXPECT_FALSE(ParseProcessCpuTicks("").ok());
  EXPECT_FALSE(ParseProcessCpuTicks("1 (x) R 1 2 3").ok());                         // too short
  EXPECT_FALSE(ParseProcessCpuTicks("1 (x) R 1 1 1 0 -1 0 0 0 0 0 ab 5 0").ok());  // not a number
}

ContentionSampler::Point PointAt(uint64_t total, uint64_t idle, uint64_t own, uint64_t excluded = 0) {
  ContentionSampler::Point p;
  p.valid = true;
  p.cpu.total = total;
  p.cpu.idle = idle;
  p.own_ticks = own;
  p.excluded_ticks = excluded;
  return p;
}

TEST(OtherCoresBetween, BusyMinusOwnOverElapsed) {
  // 2 CPUs, 100 ticks each elapsed (200 total): 150 busy, of which 40 ours
  // -> others used 110 ticks over 100 ticks per CPU = 1.1 cores.
  auto a = PointAt(1000, 500, 10);
  auto b = PointAt(1200, 550, 50);
  EXPECT_NEAR(OtherCoresBetween(a, b, 2), 1.1, 1e-12);
  // Excluding a server's 30 ticks leaves 0.8 cores.
  EXPECT_NEAR(OtherCoresBetween(PointAt(1000, 500, 10, 0), PointAt(1200, 550, 50, 30), 2), 0.8, 1e-12);
  // Never negative (accounting skew), zero without elapsed time or data.
  EXPECT_EQ(OtherCoresBetween(PointAt(1000, 500, 0), PointAt(1200, 690, 100), 2), 0);
  EXPECT_EQ(OtherCoresBetween(b, a, 2), 0);
  EXPECT_EQ(OtherCoresBetween(ContentionSampler::Point{}, b, 2), 0);
}

TEST(ContentionReading, MarksAboveTheThreshold) {
  ContentionReading r;
  r.valid = true;
  r.other_cores = 0.35;
  r.threshold_cores = 0.1;
  EXPECT_TRUE(r.contended());
  EXPECT_EQ(r.Mark(), "(contended: 35% of a core used by other processes)");
  r.other_cores = 0.05;
  EXPECT_FALSE(r.contended());
  EXPECT_EQ(r.Mark(), "");
  r.other_cores = 2;
  r.valid = false;  // unmeasured figures are not marked
  EXPECT_FALSE(r.contended());
}

TEST(ContentionReading, JsonRoundTrip) {
  ContentionReading r;
  r.valid = true;
  r.seconds = 2;
  r.other_cores = 1.25;
  r.peak_other_cores = 1.9;
  r.own_cores = 0.5;
  r.cpus = 2;
  nlohmann::json j = r.ToJson();
  EXPECT_TRUE(j["contended"].get<bool>());
  EXPECT_EQ(j["mark"], r.Mark());
  ContentionReading back = ContentionReading::FromJson(j);
  EXPECT_TRUE(back.valid);
  EXPECT_DOUBLE_EQ(back.other_cores, 1.25);
  EXPECT_DOUBLE_EQ(back.peak_other_cores, 1.9);
  EXPECT_EQ(back.cpus, 2);
  EXPECT_FALSE(ContentionReading::FromJson(nlohmann::json(3)).valid);
}

TEST(Combine, TimeWeightedMeanAndHighestPeak) {
  ContentionReading a, b, unmeasured;
  a.valid = b.valid = true;
  a.seconds = 1;
  a.other_cores = 0.2;
  a.peak_other_cores = 0.5;
  b.seconds = 3;
  b.other_cores = 1.0;
  b.peak_other_cores = 1.5;
  unmeasured.other_cores = 9;
  ContentionReading c = Combine({a, b, unmeasured});
  EXPECT_TRUE(c.valid);
  EXPECT_DOUBLE_EQ(c.seconds, 4);
  EXPECT_DOUBLE_EQ(c.other_cores, (0.2 * 1 + 1.0 * 3) / 4);
  EXPECT_DOUBLE_EQ(c.peak_other_cores, 1.5);
  EXPECT_FALSE(Combine({}).valid);
}

TEST(ContentionSampler, ReadsThisMachine) {
  ContentionOptions o;
  o.interval_seconds = 0.02;
  ContentionSampler sampler(o);
  ContentionSampler::Point start = sampler.Now();
  ASSERT_TRUE(start.valid);
  // Spin so that this process accrues CPU time of its own.
  volatile double sink = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) sink = sink + std::sqrt(sink + 1);
  ContentionReading r = sampler.Since(start);
  ASSERT_TRUE(r.valid);
  EXPECT_GT(r.seconds, 0);
  EXPECT_GE(r.cpus, 1);
  EXPECT_GE(r.other_cores, 0);
  EXPECT_GE(r.peak_other_cores, r.other_cores);
  EXPECT_LE(r.other_cores, r.cpus + 0.01);
  EXPECT_GT(r.own_cores, 0);
}

}  // namespace contention_tests
}  // namespace kiln::bench
