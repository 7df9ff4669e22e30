// Access log lines.
#include "server/access_log.h"

#include <fmt/format.h>

namespace kiln::server {
namespace {

// The client chose the path: control characters and quotes are escaped so
// that it cannot forge or break log lines.
std::string Printable(const std::string& text) {
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

AccessRecord& CurrentAccessRecord() {
  thread_local AccessRecord record;
  return record;
}

std::string AccessLine(const AccessRecord& record, const std::string& remote_addr, int remote_port,
                       const std::string& method, const std::string& path, int status, double now) {
  std::string line = fmt::format("{}:{} \"{} {}\" {}", remote_addr, remote_port, Printable(method),
                                 Printable(path), status);
  if (!record.request_id.empty()) line += fmt::format(" id={}", record.request_id);
  if (record.prompt_tokens >= 0) line += fmt::format(" prompt_tokens={}", record.prompt_tokens);
  if (record.completion_tokens >= 0) line += fmt::format(" completion_tokens={}", record.completion_tokens);
  if (record.start_time >= 0) line += fmt::format(" latency={:.3f}s", now - record.start_time);
  if (!record.note.empty()) line += fmt::format(" ({})", record.note);
  return line;
}

}  // namespace kiln::server
