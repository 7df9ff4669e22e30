// Finding a connection's socket from its addresses and noticing a peer
// that hung up, on real loopback TCP connections.
#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::server {
namespace peer_socket_tests {

// A connected pair of loopback sockets: the client's and the accepted one.
struct Connection {
  int listener = -1, client = -1, accepted = -1;
  int server_port = -1, client_port = -1;
  Connection() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listener, 4), 0);
    socklen_t len = sizeof(addr);
    getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    server_port = ntohs(addr.sin_port);
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    accepted = accept(listener, nullptr, nullptr);
    sockaddr_in mine{};
    len = sizeof(mine);
    getsockname(client, reinterpret_cast<sockaddr*>(&mine), &len);
    client_port = ntohs(mine.sin_port);
  }
  ~Connection() {
    for (int fd : {listener, client, accepted}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(PeerSocketTest, FindsTheAcceptedSocketByItsAddresses) {
  Connection c;
  ASSERT_GE(c.accepted, 0);
  // The server side: local is the server port, remote the client's.
  EXPECT_EQ(FindConnectionSocket({"127.0.0.1", c.server_port, "127.0.0.1", c.client_port}), c.accepted);
  // The client side, the other way round.
  EXPECT_EQ(FindConnectionSocket({"127.0.0.1", c.client_port, "127.0.0.1", c.server_port}), c.client);
  EXPECT_EQ(FindConnectionSocket({"127.0.0.1", c.server_port, "127.0.0.1", c.client_port + 1}), -1);
  EXPECT_EQ(FindConnectionSocket({"127.0.0.1", -1, "127.0.0.1", -1}), -1);
}

TEST(PeerSocketTest, NoticesAPeerThatClosed) {
  Connection c;
  EXPECT_FALSE(PeerClosed(c.accepted));
  // Data waiting to be read is not a hang-up.
  ASSERT_EQ(write(c.client, "x", 1), 1);
  EXPECT_FALSE(PeerClosed(c.accepted));
  close(c.client);
  c.client = -1;
  for (int i = 0; i < 100 && !PeerClosed(c.accepted); ++i) usleep(10000);
  EXPECT_TRUE(PeerClosed(c.accepted));
  EXPECT_FALSE(PeerClosed(-1));
}

}  // namespace peer_socket_tests
}  // namespace kiln::server
