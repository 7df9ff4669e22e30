// `kiln bench startup`: how long a fresh process takes from its start to
// its first generated token, for each model side by side (a compiled
// artifact against the file it was compiled from, say).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace kiln::bench {

struct StartupOptions {
  std::string kiln;                 // the kiln executable to start
  std::vector<std::string> models;  // each run as `kiln generate -m MODEL`
  int runs = 5;                     // timed runs per model, after one untimed run (warm page cache)
  std::string prompt = "Hello";
  int threads = 0;                  // --threads for the runs (0: kiln's default)
  std::vector<std::string> extra_args;  // more `kiln generate` arguments, for every model
  // Cold page cache: before every run the model's files are dropped from the
  // page cache (posix_fadvise DONTNEED), no untimed run comes first, and each
  // run's reads from storage are counted.
  bool cold = false;
  // `kiln serve -m MODEL --port 0` instead of generate, timed to the line
  // that says it is ready to answer (then stopped by SIGTERM).
  bool serve = false;
};

struct StartupResult {
  std::string model;
  double file_bytes = 0;
  // Seconds from starting the process to its first byte of output (the
  // first token: `-n 1`; for serve, to its ready line), and to its exit;
  // one per run.
  std::vector<double> first_token;
  std::vector<double> exit;
  // With a cold cache, one per run: bytes the process read from storage
  // (its rusage block inputs, 512 bytes each), and bytes of the model's
  // files in the page cache when it had exited (what its reads and the
  // kernel's read-ahead brought in); before the run they are dropped.
  std::vector<double> read_bytes;
  std::vector<double> cached_after;
  double cached_before_max = 0;  // the most left in the cache after dropping (0 when dropping works)
};

// Runs `kiln generate -m MODEL -p PROMPT -n 1 --temperature 0` opts.runs + 1
// times per model, in turn, the first run of each untimed (opts.runs times
// with opts.cold, the files dropped from the page cache before each). Errors when a
// run fails (with its stderr's last line).
Expected<std::vector<StartupResult>> RunStartupBenchmark(const StartupOptions& options);

// The table of medians (and minima), one row per model; `serve` names the
// first column's event "ready" rather than "first token".
std::string StartupTable(const std::vector<StartupResult>& results, bool serve = false);

}  // namespace kiln::bench
