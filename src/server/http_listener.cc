// Binding with a deep backlog and stopping without cutting streams.
#include "server/http_listener.h"

#include <sys/socket.h>

namespace kiln::server {

Expected<int> HttpListener::BindAndListen(const std::string& host, int port, int backlog) {
  int bound = port;
  if (port == 0) {
    bound = bind_to_any_port(host);
    if (bound < 0) return IoError("cannot listen on {}:0 (no free port, or the address is not local)", host);
  } else if (!bind_to_port(host, port)) {
    return IoError("cannot listen on {}:{} (in use, not permitted, or not a local address)", host, port);
  }
  // A second listen() on a listening socket only changes its backlog.
  ::listen(svr_sock_, backlog);
  return bound;
}

void HttpListener::Serve() {
  listen_after_bind();
  // The library closed the socket when accepting failed, but kept its
  // number; forget it so that nothing closes the number again once the
  // system has reused it.
  svr_sock_ = INVALID_SOCKET;
  serve_finished_ = true;
}

void HttpListener::StopAccepting() {
  // Not stop(): that marks the server as shutting down, which makes the
  // library end every stream at its next chunk. Shutting the socket only
  // makes the accept loop fail and leave; the library then closes it.
  if (serve_finished_) return;
  socket_t sock = svr_sock_;
  if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
}

}  // namespace kiln::server
