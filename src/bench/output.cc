// Files, run descriptions and progress lines.
#include "bench/output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "core/cpu_info.h"

namespace kiln::bench {

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  if (!out) return IoError("{}: cannot write: {}", path, std::strerror(errno));
  out << text;
  if (!out.flush()) return IoError("{}: write failed", path);
  return Status::Ok();
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  return raw;
}

nlohmann::ordered_json RunInfoJson() {
  const CpuInfo& cpu = GetCpuInfo();
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
  nlohmann::ordered_json j;
  j["kiln_version"] = KILN_VERSION;
  j["cpu"] = cpu.Summary();
  j["isa"] = cpu.BestIsa();
  j["logical_cpus"] = cpu.logical_cpus;
  j["physical_cores"] = cpu.physical_cores;
  j["started_at"] = when;
  j["command"] = CommandLine();
  return j;
}

Progress::Progress() : tty_(isatty(STDERR_FILENO) == 1), last_(std::chrono::steady_clock::now()) {}

void Progress::Update(const std::string& text, bool force) {
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", text);
    std::fflush(stderr);
    open_line_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < std::chrono::seconds(5)) return;
  last_ = now;
  fmt::print(stderr, "{}\n", text);
}

void Progress::Done() {
  if (open_line_) fmt::print(stderr, "\n");
  open_line_ = false;
}

}  // namespace kiln::bench
