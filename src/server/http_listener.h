// cpp-httplib's server with the two changes kiln needs: a deep listen
// backlog (the library's is 5, too few for many clients connecting at
// once), and a way to stop accepting that lets running requests finish
// (the library's stop() ends streams mid-response).
#pragma once

#include <httplib.h>

#include <atomic>
#include <string>

#include "core/status.h"

namespace kiln::server {

class HttpListener : public httplib::Server {
 public:
  // Binds host:port (0: a free port), listens with `backlog` pending
  // connections, and returns the port. The error names the address.
  Expected<int> BindAndListen(const std::string& host, int port, int backlog);

  // Accepts and serves connections until StopAccepting(), then returns
  // once every connection's thread is done.
  void Serve();

  // Shuts the listening socket: the accept loop ends and new connections
  // are refused, while requests already being served run to their end.
  // Thread-safe.
  void StopAccepting();

 private:
  std::atomic<bool> serve_finished_{false};
};

}  // namespace kiln::server
