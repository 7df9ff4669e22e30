// One line per answered request: who asked, what, the status, the request
// id, its tokens and how long it took.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::server {

// What a request's handler learns for its log line. The HTTP library calls
// its logger on the thread that served the request, after the last byte
// (a stream's too), so the handler leaves its figures in a thread-local
// record the logger reads.
struct AccessRecord {
  double start_time = -1;  // EngineClock() seconds; negative when unknown
  std::string request_id;
  int64_t prompt_tokens = -1;  // negative when the request generated nothing
  int64_t completion_tokens = -1;
  std::string note;  // why a request ended early ("client disconnected")
  // The request's in-flight token (ServerState::EnterRequest), released
  // with the record after the response's last byte: shutdown must not
  // treat a request as done while its answer is still being written.
  std::shared_ptr<void> in_flight;
};

// The calling thread's record.
AccessRecord& CurrentAccessRecord();

// The log line, e.g. `127.0.0.1:40312 "POST /v1/completions" 200
// id=cmpl-9f2c prompt_tokens=5 completion_tokens=16 latency=0.042s`.
std::string AccessLine(const AccessRecord& record, const std::string& remote_addr, int remote_port,
                       const std::string& method, const std::string& path, int status, double now);

}  // namespace kiln::server
