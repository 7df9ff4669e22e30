// Minimal leveled logging to stderr. Not for hot paths.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace kiln {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < GetLogLevel()) return;
  LogLine(level, fmt::format(f, std::forward<Args>(args)...));
}

#define KILN_LOG_DEBUG(...) ::kiln::Log(::kiln::LogLevel::kDebug, __VA_ARGS__)
#define KILN_LOG_INFO(...) ::kiln::Log(::kiln::LogLevel::kInfo, __VA_ARGS__)
#define KILN_LOG_WARN(...) ::kiln::Log(::kiln::LogLevel::kWarn, __VA_ARGS__)
#define KILN_LOG_ERROR(...) ::kiln::Log(::kiln::LogLevel::kError, __VA_ARGS__)

}  // namespace kiln
