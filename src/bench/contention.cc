// Sampling /proc for other processes' CPU use.
#include "bench/contention.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace kiln::bench {
namespace {

// Background samples kept at most (a day at 4 per second is far less).
constexpr size_t kMaxIntervals = 1 << 20;
// Shorter windows are widened backwards: /proc counts in 10 ms ticks.
constexpr double kMinWindowSeconds = 0.5;
constexpr size_t kRecentPoints = 64;
constexpr int kTickWaits = 50;  // of 10 ms, for /proc/stat to move

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Whitespace-separated unsigned numbers at the start of `text`, at most `max`.
std::vector<uint64_t> LeadingNumbers(std::string_view text, size_t max) {
  std::vector<uint64_t> out;
  size_t i = 0;
  while (out.size() < max) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size() || text[i] == '\n') break;
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc()) break;
    out.push_back(v);
    i = static_cast<size_t>(end - text.data());
  }
  return out;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t ProcessTicks(const std::string& stat_path) {
  auto ticks = ParseProcessCpuTicks(ReadSmallFile(stat_path));
  return ticks.ok() ? *ticks : 0;
}

}  // namespace

Expected<CpuTimes> ParseProcStat(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? text.npos : eol - pos);
    if (line.size() > 4 && line.substr(0, 4) == "cpu ") {
      // user nice system idle iowait irq softirq steal guest guest_nice
      std::vector<uint64_t> f = LeadingNumbers(line.substr(4), 10);
      if (f.size() < 4) {
        return Corrupt("/proc/stat: aggregate cpu line has {} numbers, expected at least 4", f.size());
      }
      CpuTimes t;
      const size_t counted = std::min<size_t>(f.size(), 8);  // guest time is inside user and nice
      for (size_t i = 0; i < counted; ++i) t.total += f[i];
      t.idle = f[3] + (f.size() > 4 ? f[4] : 0);
      return t;
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return Corrupt("/proc/stat: no aggregate cpu line");
}

int CountCpus(std::string_view text) {
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.size() - pos > 3 && text.substr(pos, 3) == "cpu" && text[pos + 3] >= '0' && text[pos + 3] <= '9') {
      ++n;
    }
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return n;
}

Expected<uint64_t> ParseProcessCpuTicks(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return Corrupt("process stat: no ')' after the command name");
  // After ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime stime, i.e. utime and stime are fields 12 and 13.
  std::string_view rest = text.substr(close + 1);
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (fields.size() < 13 && i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\n')) ++i;
    size_t start = i;
    while (i < rest.size() && rest[i] != ' ' && rest[i] != '\n') ++i;
    if (i > start) fields.push_back(rest.substr(start, i - start));
  }
  if (fields.size() < 13) return Corrupt("process stat: {} fields after the command name, expected 13", fields.size());
  uint64_t utime = 0, stime = 0;
  auto parse = [](std::string_view s, uint64_t* v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (!parse(fields[11], &utime) || !parse(fields[12], &stime)) {
    return Corrupt("process stat: utime '{}' or stime '{}' is not a number", fields[11], fields[12]);
  }
  return utime + stime;
}

std::string ContentionReading::Mark() const {
  if (!contended()) return "";
  return fmt::format("(contended: {:.0f}% of a core used by other processes)", 100 * other_cores);
}

nlohmann::ordered_json ContentionReading::ToJson() const {
  nlohmann::ordered_json j;
  j["measured"] = valid;
  j["seconds"] = seconds;
  j["other_processes_cores"] = other_cores;
  j["other_processes_peak_cores"] = peak_other_cores;
  j["own_cores"] = own_cores;
  j["cpus"] = cpus;
  j["threshold_cores"] = threshold_cores;
  j["contended"] = contended();
  j["mark"] = Mark();
  return j;
}

ContentionReading ContentionReading::FromJson(const nlohmann::json& j) {
  ContentionReading r;
  if (!j.is_object()) return r;
  auto number = [&](const char* key, double fallback) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
  };
  r.valid = j.contains("measured") && j["measured"].is_boolean() && j["measured"].get<bool>();
  r.seconds = number("seconds", 0);
  r.other_cores = number("other_processes_cores", 0);
  r.peak_other_cores = number("other_processes_peak_cores", 0);
  r.own_cores = number("own_cores", 0);
  r.cpus = static_cast<int>(number("cpus", 0));
  r.threshold_cores = number("threshold_cores", r.threshold_cores);
  return r;
}

ContentionReading Combine(const std::vector<ContentionReading>& readings) {
  ContentionReading out;
  double weighted_other = 0, weighted_own = 0;
  for (const ContentionReading& r : readings) {
    if (!r.valid) continue;
    out.valid = true;
    out.seconds += r.seconds;
    weighted_other += r.other_cores * r.seconds;
    weighted_own += r.own_cores * r.seconds;
    out.peak_other_cores = std::max(out.peak_other_cores, r.peak_other_cores);
    out.cpus = r.cpus;
    out.threshold_cores = r.threshold_cores;
  }
  if (out.seconds > 0) {
    out.other_cores = weighted_other / out.seconds;
    out.own_cores = weighted_own / out.seconds;
  }
  return out;
}

double OtherCoresBetween(const ContentionSampler::Point& a, const ContentionSampler::Point& b, int cpus) {
  if (!a.valid || !b.valid || b.cpu.total <= a.cpu.total) return 0;
  const double per_cpu_ticks = static_cast<double>(b.cpu.total - a.cpu.total) / std::max(cpus, 1);
  const double busy = static_cast<double>(b.cpu.busy()) - static_cast<double>(a.cpu.busy());
  const double mine = static_cast<double>(b.own_ticks) - static_cast<double>(a.own_ticks) +
                      static_cast<double>(b.excluded_ticks) - static_cast<double>(a.excluded_ticks);
  return std::max(0.0, (busy - mine) / per_cpu_ticks);
}

ContentionSampler::ContentionSampler(ContentionOptions options) : options_(std::move(options)) {
  cpus_ = std::max(1, CountCpus(ReadSmallFile("/proc/stat")));
  thread_ = std::thread([this] { Loop(); });
}

ContentionSampler::~ContentionSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

ContentionSampler::Point ContentionSampler::Now() const {
  Point p;
  p.time = SteadySeconds();
  auto cpu = ParseProcStat(ReadSmallFile("/proc/stat"));
  auto own = ParseProcessCpuTicks(ReadSmallFile("/proc/self/stat"));
  if (!cpu.ok() || !own.ok()) return p;
  p.valid = true;
  p.cpu = *cpu;
  p.own_ticks = *own;
  for (pid_t pid : options_.exclude_pids) p.excluded_ticks += ProcessTicks(fmt::format("/proc/{}/stat", pid));
  return p;
}

ContentionReading ContentionSampler::Since(const Point& start_point) const {
  Point end = Now();
  Point start = start_point;
  if (end.time - start.time < kMinWindowSeconds) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
      if (it->time <= end.time - kMinWindowSeconds) {
        if (it->time < start.time) start = *it;
        break;
      }
    }
  }
  // A run shorter than a clock tick, before the sampler holds an older
  // point, leaves /proc/stat unchanged: wait for the next ticks rather than
  // report nothing (the run is over; this only widens the window after it).
  for (int i = 0; i < kTickWaits && start.valid && end.valid && end.cpu.total <= start.cpu.total; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    end = Now();
  }
  ContentionReading r;
  r.threshold_cores = options_.threshold_cores;
  r.cpus = cpus_;
  if (!start.valid || !end.valid || end.cpu.total <= start.cpu.total) return r;
  r.valid = true;
  r.seconds = end.time - start.time;
  r.other_cores = OtherCoresBetween(start, end, cpus_);
  const double per_cpu_ticks = static_cast<double>(end.cpu.total - start.cpu.total) / cpus_;
  r.own_cores = static_cast<double>(end.own_ticks - start.own_ticks) / per_cpu_ticks;
  r.peak_other_cores = r.other_cores;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [time, cores] : intervals_) {
    if (time > start.time && time <= end.time) r.peak_other_cores = std::max(r.peak_other_cores, cores);
  }
  return r;
}

void ContentionSampler::Loop() {
  Point last = Now();
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::duration<double>(options_.interval_seconds);
  while (!wake_.wait_for(lock, interval, [this] { return stop_; })) {
    lock.unlock();
    Point now = Now();
    const double cores = OtherCoresBetween(last, now, cpus_);
    lock.lock();
    if (now.valid && last.valid) {
      if (intervals_.size() >= kMaxIntervals) intervals_.erase(intervals_.begin(), intervals_.begin() + kMaxIntervals / 2);
      intervals_.emplace_back(now.time, cores);
    }
    if (now.valid) {
      recent_.push_back(now);
      if (recent_.size() > kRecentPoints) recent_.pop_front();
    }
    last = now;
  }
}

}  // namespace kiln::bench
