// How much CPU other processes used while a figure was measured: the
// machine may be shared, and a figure taken while something else ran is
// marked as such. Reads /proc/stat (all CPUs' busy and idle time) and this
// process's own CPU time; the others' use is the difference.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace kiln::bench {

// Clock ticks summed over all CPUs, from the aggregate "cpu" line of
// /proc/stat. Guest time is already inside user and nice and is not counted
// twice; time stolen by the hypervisor is busy time (someone else ran).
struct CpuTimes {
  uint64_t total = 0;
  uint64_t idle = 0;  // idle and iowait
  uint64_t busy() const { return total - idle; }
};

// Parses /proc/stat text. Fails (naming the problem) without a well-formed
// aggregate "cpu" line of at least four numbers.
Expected<CpuTimes> ParseProcStat(std::string_view text);

// The number of "cpuN" lines in /proc/stat text (0 if none).
int CountCpus(std::string_view text);

// User plus system clock ticks from /proc/<pid>/stat text. The command name
// may hold spaces and parentheses; fields are read after its last ')'.
Expected<uint64_t> ParseProcessCpuTicks(std::string_view text);

// Others' CPU use over a window. Units are cores: 0.35 means 35% of one
// core, on average, was busy with processes other than this one (and those
// excluded, such as a local server under test).
struct ContentionReading {
  bool valid = false;  // false when /proc could not be read
  double seconds = 0;
  double other_cores = 0;       // mean over the window
  double peak_other_cores = 0;  // highest over one sampling interval
  double own_cores = 0;
  int cpus = 0;
  double threshold_cores = 0.1;

  // Others used more than the threshold: the figure is not a quiet-run one.
  bool contended() const { return valid && other_cores > threshold_cores; }
  // "(contended: 35% of a core used by other processes)", or "" when quiet.
  std::string Mark() const;
  nlohmann::ordered_json ToJson() const;
  // The inverse of ToJson; missing fields read as an unmeasured window.
  static ContentionReading FromJson(const nlohmann::json& j);
};

// The reading covering several windows: time-weighted mean, highest peak.
ContentionReading Combine(const std::vector<ContentionReading>& readings);

struct ContentionOptions {
  double interval_seconds = 0.25;  // between background samples (for the peak)
  double threshold_cores = 0.1;    // above this a figure is marked contended
  std::vector<pid_t> exclude_pids;  // processes not counted as others
};

// Samples in a background thread from construction to destruction; any
// number of windows may be read, overlapping or not.
class ContentionSampler {
 public:
  explicit ContentionSampler(ContentionOptions options = {});
  ~ContentionSampler();
  ContentionSampler(const ContentionSampler&) = delete;
  ContentionSampler& operator=(const ContentionSampler&) = delete;

  // A snapshot to measure a window from.
  struct Point {
    bool valid = false;
    double time = 0;  // seconds, steady clock
    CpuTimes cpu;
    uint64_t own_ticks = 0;
    uint64_t excluded_ticks = 0;
  };
  Point Now() const;

  // Others' use from `start` to now. A window shorter than half a second
  // (a few clock ticks, too coarse to mean anything) is widened backwards
  // to the background sample that makes it at least that long.
  ContentionReading Since(const Point& start) const;

  const ContentionOptions& options() const { return options_; }

 private:
  void Loop();

  ContentionOptions options_;
  int cpus_ = 1;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  // Background samples: (end time of an interval, others' cores in it),
  // and the latest snapshots for widening short windows.
  std::vector<std::pair<double, double>> intervals_;
  std::deque<Point> recent_;
  std::thread thread_;
};

// Others' cores between two points (clamped at 0), for `cpus` CPUs.
double OtherCoresBetween(const ContentionSampler::Point& a, const ContentionSampler::Point& b, int cpus);

}  // namespace kiln::bench
