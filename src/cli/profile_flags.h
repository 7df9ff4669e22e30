// --profile and --trace, shared by the commands that run a model: what
// they record is the profiler's (compiler/profiler.h); at the end the
// per-op table is printed and the Chrome trace written.
#pragma once

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/roofline.h"
#include "core/status.h"

namespace kiln::cli {

struct ProfileFlags {
  bool profile = false;
  std::string trace;
  std::string roofline_cache = bench::DefaultRooflineCachePath();
  bool no_roofline = false;

  bool any() const { return profile || !trace.empty(); }
};

// Adds --profile, --trace FILE, --roofline-cache and --no-roofline (under a
// "Profiling" group); `with_profile` false leaves --profile out (for a
// command that always prints the table), `with_roofline` false the
// roofline flags (for a command that has its own).
void AddProfileFlags(CLI::App* cmd, ProfileFlags* flags, bool with_profile = true, bool with_roofline = true);

// Starts recording when either flag was given.
void StartProfiling(const ProfileFlags& flags);

// Stops recording; with --profile (or `always_table`) prints the table to
// `out`, the roofline being this machine's at `threads` for weights of
// `arithmetic` (from the cache, measured when absent unless --no-roofline);
// with --trace writes the trace.
Status FinishProfiling(const ProfileFlags& flags, int threads, bench::WeightArithmetic arithmetic,
                       std::FILE* out = stderr, bool always_table = false);

}  // namespace kiln::cli
