// Log lines are written whole, so concurrent threads do not interleave them.
#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("KILN_LOG");
  if (env == nullptr) return LogLevel::kInfo;
  std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  if (v == "off") return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<LogLevel> g_level{InitialLevel()};

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view message) {
  static const char* kNames[] = {"debug", "info", "warn", "error", "off"};
  std::string line = fmt::format("[kiln {}] {}\n", kNames[static_cast<int>(level)], message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace kiln
