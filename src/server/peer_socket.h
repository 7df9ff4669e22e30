// Finding out that a client has gone while its request is still running.
// cpp-httplib 0.11 neither exposes a connection's socket to handlers nor
// reports a dropped client until a write fails, and a request that waits
// in the queue or generates without streaming writes nothing for a long
// time; so the socket is looked up by its addresses and watched directly.
#pragma once

#include <string>
#include <vector>

namespace kiln::server {

// One TCP connection's endpoints, as the HTTP library reports them.
struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

// The descriptor of this process's socket connected with these endpoints,
// or -1 when there is none (or the system cannot tell). The connection
// stays open while its request is being served, so the descriptor remains
// this connection's for that long.
int FindConnectionSocket(const ConnectionAddress& address);

// The descriptors of this process's connected sockets whose local port is
// `port` (a server's accepted connections), found the same way.
std::vector<int> ConnectionsOnLocalPort(int port);

// True once the peer has closed or reset the connection (end of input or
// an error is pending). Never blocks. A negative `fd` is never closed.
bool PeerClosed(int fd);

}  // namespace kiln::server
