// What every mode shares in its output: writing files, describing the run
// (machine, command, time), and progress lines on the terminal.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln::bench {

// Writes `text` to `path` (replacing it). Errors name the path.
Status WriteTextFile(const std::string& path, const std::string& text);

// {"kiln_version", "cpu", "isa", "logical_cpus", "physical_cores",
// "started_at" (UTC), "command"}: what a JSON report was measured on and how.
nlohmann::ordered_json RunInfoJson();

// This process's command line, arguments separated by spaces ("" when
// unknown).
std::string CommandLine();

// Progress on stderr: rewritten in place on a terminal; elsewhere (a log)
// one line per forced update or at most one every few seconds.
class Progress {
 public:
  Progress();
  // Shows `text`; `force` prints it even when lines are being throttled.
  void Update(const std::string& text, bool force = false);
  // Ends the in-place line, if any.
  void Done();

 private:
  bool tty_ = false;
  bool open_line_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kiln::bench
