// One request forwarded to a backend, run on a thread of its own so that
// the client's thread can relay the response as it arrives, watch the
// client, and give up on the backend (closing its connection, which makes
// a kiln backend abort the request) when the client goes away.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "router/backend.h"

namespace kiln::router {

class BackendExchange {
 public:
  // Sends `method path` with `headers` and `body` to `backend` at once.
  BackendExchange(Backend& backend, std::string method, std::string path, httplib::Headers headers,
                  std::string body);
  // Cancels the exchange if it is still running, and waits for its thread.
  ~BackendExchange();
  BackendExchange(const BackendExchange&) = delete;
  BackendExchange& operator=(const BackendExchange&) = delete;

  // Waits up to `timeout` until body bytes are waiting or the exchange
  // has finished.
  void Wait(std::chrono::milliseconds timeout);
  // The body bytes received since the last call.
  std::string TakeData();

  // Closes the backend connection; the exchange then finishes as failed.
  void Cancel();

  bool finished() const;
  // Finished without a complete response (or canceled).
  bool failed() const;
  // Why it failed, in words.
  std::string error() const;
  // The backend could not be reached at all (nothing was sent).
  bool connect_failed() const;
  // Whether the response's status line and headers have arrived, and them.
  bool has_head() const;
  int status() const;
  std::string header(const std::string& name) const;
  // Body bytes received so far, taken or not.
  size_t bytes_received() const;

  Backend& backend() { return backend_; }

 private:
  void Run(std::string method, std::string path, httplib::Headers headers, std::string body);

  Backend& backend_;
  std::unique_ptr<httplib::Client> client_;  // kept until the destructor unless released to the pool
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool canceled_ = false;
  bool finished_ = false;
  httplib::Error error_ = httplib::Error::Success;
  bool has_head_ = false;
  int status_ = 0;
  httplib::Headers headers_;
  std::string pending_;
  size_t received_ = 0;
  std::thread thread_;
};

}  // namespace kiln::router
