// Socket lookup by address through /proc/self/fd, and a non-blocking check
// for a peer that hung up.
#include "server/peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace kiln::server {
namespace {

// The numeric host and port of an address, as getnameinfo writes them (the
// form the HTTP library reports).
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  char host_buf[NI_MAXHOST];
  char port_buf[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host_buf, sizeof(host_buf), port_buf,
                  sizeof(port_buf), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *host = host_buf;
  *port = std::atoi(port_buf);
  return true;
}

bool Matches(int fd, const ConnectionAddress& address) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  // Ports first: one comparison rules out nearly every other socket.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!HostAndPort(addr, len, &host, &port) || port != address.remote_port || host != address.remote_addr) {
    return false;
  }
  len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return HostAndPort(addr, len, &host, &port) && port == address.local_port && host == address.local_addr;
}

// Calls `visit` with each open descriptor until it returns true.
template <typename Visit>
void ForEachDescriptor(Visit visit) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    if (visit(static_cast<int>(fd))) break;
  }
  closedir(dir);
}

}  // namespace

int FindConnectionSocket(const ConnectionAddress& address) {
  if (address.remote_port < 0 || address.local_port < 0) return -1;
  int found = -1;
  ForEachDescriptor([&](int fd) {
    if (!Matches(fd, address)) return false;
    found = fd;
    return true;
  });
  return found;
}

std::vector<int> ConnectionsOnLocalPort(int port) {
  std::vector<int> found;
  ForEachDescriptor([&](int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    std::string host;
    int local = -1;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
    if (!HostAndPort(addr, len, &host, &local) || local != port) return false;
    len = sizeof(addr);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) found.push_back(fd);  // connected, not listening
    return false;
  });
  return found;
}

bool PeerClosed(int fd) {
  if (fd < 0) return false;
  pollfd p{};
  p.fd = fd;
  p.events = POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace kiln::server
