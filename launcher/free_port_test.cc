#include "launcher/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "gtest/gtest.h"

namespace psc {
namespace launcher {
namespace {

// A socket bound to 127.0.0.1:`port` (0: any), with SO_REUSEADDR as gRPC's
// listeners have it; returns the bound port or -1, and closes the socket.
int BindOnce(int port, bool reuse_addr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const int one = 1;
  if (reuse_addr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 1) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

TEST(FreePortTest, PortsAreDistinctAndAServerBindsThemAtOnce) {
  auto ports = PickFreeLoopbackPorts(8);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 8u);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 8u);
  for (int p : *ports) {
    EXPECT_GT(p, 0);
    EXPECT_EQ(BindOnce(p, /*reuse_addr=*/true), p) << "a listener with SO_REUSEADDR binds " << p;
  }
}

// The race the reservation closes: a port picked and merely closed is handed
// to the next bind(0) of any process with a chance of about 1 in the number
// of free ports, so 3000 binds would hit some of 64 picked ports (about 13
// hits expected on Linux's default range). Reserved ports get none.
TEST(FreePortTest, ThePickedPortsAreNotHandedToOtherBindsToPortZero) {
  auto ports = PickFreeLoopbackPorts(64);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const std::set<int> picked(ports->begin(), ports->end());
  int hits = 0;
  for (int i = 0; i < 3000; ++i) {
    const int p = BindOnce(0, /*reuse_addr=*/i % 2 == 0);
    ASSERT_GT(p, 0);
    hits += picked.count(p);
  }
  EXPECT_EQ(hits, 0);
}

}  // namespace
}  // namespace launcher
}  // namespace psc
