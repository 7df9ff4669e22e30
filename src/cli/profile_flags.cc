// Turning the recorded profile into the table and the trace.
#include "cli/profile_flags.h"

#include <fmt/format.h>

#include "bench/chrome_trace.h"
#include "bench/output.h"
#include "bench/profile_table.h"
#include "compiler/profiler.h"

namespace kiln::cli {

void AddProfileFlags(CLI::App* cmd, ProfileFlags* flags, bool with_profile, bool with_roofline) {
  const std::string group = "Profiling";
  if (with_profile) {
    cmd->add_flag("--profile", flags->profile,
                  "Print per-op times, bytes, FLOPs and roofline fractions, prefill and decode apart")
        ->group(group);
  }
  cmd->add_option("--trace", flags->trace,
                  "Write a Chrome trace (chrome://tracing, Perfetto) of every kernel call and step to FILE")
      ->group(group);
  if (!with_roofline) return;
  cmd->add_option("--roofline-cache", flags->roofline_cache, "The roofline cache (written by `kiln bench roofline`)")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--no-roofline", flags->no_roofline,
                "Do not measure the roofline when the cache lacks it (the table then has no fractions)")
      ->group(group);
}

void StartProfiling(const ProfileFlags& flags) {
  if (flags.any()) EnableProfiling(true);
}

Status FinishProfiling(const ProfileFlags& flags, int threads, bench::WeightArithmetic arithmetic, std::FILE* out,
                       bool always_table) {
  if (!flags.any() && !always_table) return Status::Ok();
  EnableProfiling(false);
  if (!flags.trace.empty()) {
    KILN_RETURN_IF_ERROR(bench::WriteChromeTrace(flags.trace));
    fmt::print(stderr, "wrote the trace to {}\n", flags.trace);
  }
  if (!flags.profile && !always_table) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(std::vector<bench::PhaseProfile> phases, bench::SummarizeProfile(ProfileEvents()));
  bench::ProfilePeaks peaks;
  auto cached = bench::LoadRooflineCache(flags.roofline_cache, threads);
  if (!cached.ok() && !flags.no_roofline) {
    bench::Progress progress;
    cached = bench::LoadOrMeasureRoofline(flags.roofline_cache, threads,
                                          [&](const std::string& line) { progress.Update(line, true); });
    progress.Done();
  }
  if (cached.ok() && !cached->rows.empty()) {
    peaks.compute = bench::ComputePeak(cached->rows.front(), arithmetic);
    peaks.bandwidth = bench::BandwidthPeak(cached->rows.front());
  } else {
    fmt::print(stderr, "roofline: {}; the table has no fractions of the peak\n", cached.status().message());
  }
  fmt::print(out, "{}", bench::FormatProfileTable(phases, peaks));
  std::fflush(out);
  return Status::Ok();
}

}  // namespace kiln::cli
