// server/http_limits.h on real loopback sockets, without httplib: the
// watchdog closes a connection whose header does not complete within its
// deadline or that reads too many bytes before the header ends, leaves a
// served connection alone, and PeerClosed tells a closed client from a live
// or pipelining one.
#include "server/http_limits.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace hqekv::server {
namespace {

using std::chrono::milliseconds;

// A listening socket on a free loopback port, a client connected to it and
// the server's end of that connection (left open: the watch finds it).
struct Loopback {
  int listener = -1, client = -1, server = -1, port = 0;
  Loopback() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listener, 8);
    socklen_t n = sizeof(a);
    getsockname(listener, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    client = socket(AF_INET, SOCK_STREAM, 0);
    connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    server = accept(listener, nullptr, nullptr);
  }
  ~Loopback() {
    for (int fd : {listener, client, server})
      if (fd >= 0) close(fd);
  }
};

// Whether the server's end of `lb` reads end-of-stream within `limit`
// (the watchdog's shutdown), as httplib's blocked read would.
bool ServerSideEnds(const Loopback& lb, milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000),
             static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  setsockopt(lb.server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    const ssize_t r = recv(lb.server, buf, sizeof(buf), 0);
    if (r == 0) return true;
    if (r < 0) return false;  // timed out: still open
  }
  return false;
}

ConnectionLimits Fast() {
  ConnectionLimits l;
  l.header_deadline = milliseconds(300);
  l.body_deadline = milliseconds(300);
  l.max_header_bytes = 64 << 10;
  l.tick = milliseconds(10);
  return l;
}

TEST(ConnectionHeaderDeadline, AHeaderNotCompleteInTimeIsClosed) {
  Loopback lb;
  ConnectionWatch w(lb.port, Fast());
  std::string peer;
  const int64_t id = w.Identify(&peer);
  ASSERT_GE(id, 0) << "the accepted connection was not found";
  EXPECT_EQ(peer, "127.0.0.1");
  std::thread t([&] {
    w.Begin(id);
    // A byte every 50 ms: every single read is quick, the header never ends.
    std::thread slow([&] {
      for (int i = 0; i < 40; ++i) {
        if (send(lb.client, "a", 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(milliseconds(50));
      }
    });
    EXPECT_TRUE(ServerSideEnds(lb, milliseconds(1500)));
    slow.join();
    w.End();
  });
  t.join();
  EXPECT_EQ(w.Counters().header_deadline, 1);
}

TEST(ConnectionHeaderDeadline, AServedRequestIsNotCut) {
  Loopback lb;
  ConnectionWatch w(lb.port, Fast());
  std::string peer;
  const int64_t id = w.Identify(&peer);
  ASSERT_GE(id, 0);
  std::thread t([&] {
    w.Begin(id);
    ConnectionWatch::HeaderDone(/*body=*/false);  // a long generation follows
    EXPECT_FALSE(ServerSideEnds(lb, milliseconds(800)));
    w.End();
  });
  t.join();
  EXPECT_EQ(w.Counters().header_deadline, 0);
}

TEST(ConnectionBodyDeadline, ABodyNotCompleteInTimeIsClosed) {
  Loopback lb;
  ConnectionWatch w(lb.port, Fast());
  std::string peer;
  const int64_t id = w.Identify(&peer);
  ASSERT_GE(id, 0);
  std::thread t([&] {
    w.Begin(id);
    ConnectionWatch::HeaderDone(/*body=*/true);
    EXPECT_TRUE(ServerSideEnds(lb, milliseconds(1500)));
    w.End();
  });
  t.join();
  EXPECT_EQ(w.Counters().body_deadline, 1);
}

TEST(ConnectionHeaderFlood, ReadingPastTheHeaderBoundCloses) {
  Loopback lb;
  ConnectionLimits l = Fast();
  l.header_deadline = milliseconds(10000);
  ConnectionWatch w(lb.port, l);
  std::string peer;
  const int64_t id = w.Identify(&peer);
  ASSERT_GE(id, 0);
  std::thread flood([&] {
    const std::string chunk(16 << 10, 'x');
    for (int i = 0; i < 4096; ++i)
      if (send(lb.client, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
  });
  int64_t read_total = 0;
  std::thread t([&] {
    w.Begin(id);
    char buf[4096];
    for (;;) {  // read as httplib reads header lines: everything, until cut
      const ssize_t r = recv(lb.server, buf, sizeof(buf), 0);
      if (r <= 0) break;
      read_total += r;
    }
    w.End();
  });
  t.join();
  shutdown(lb.client, SHUT_RDWR);
  flood.join();
  EXPECT_EQ(w.Counters().header_bytes, 1);
  EXPECT_LT(read_total, 64 << 20) << "the whole flood was read";
}

TEST(ConnectionClientGone, PeerClosedTellsAClosedClientFromALiveOne) {
  Loopback lb;
  EXPECT_FALSE(PeerClosed(lb.server));
  ASSERT_EQ(send(lb.client, "GET", 3, 0), 3);  // pipelined data: still alive
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(PeerClosed(lb.server));
  close(lb.client);
  lb.client = -1;
  std::this_thread::sleep_for(milliseconds(20));
  char buf[8];
  ASSERT_EQ(recv(lb.server, buf, sizeof(buf), 0), 3);
  EXPECT_TRUE(PeerClosed(lb.server));
}

TEST(ConnectionClientGone, CurrentClientGoneFollowsTheServedConnection) {
  Loopback lb;
  ConnectionWatch w(lb.port, ConnectionLimits{});
  std::string peer;
  const int64_t id = w.Identify(&peer);
  ASSERT_GE(id, 0);
  EXPECT_FALSE(CurrentClientGone()) << "a thread serving no connection";
  std::thread t([&] {
    w.Begin(id);
    ConnectionWatch::HeaderDone(false);
    EXPECT_FALSE(CurrentClientGone());
    close(lb.client);
    lb.client = -1;
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_TRUE(CurrentClientGone());
    w.End();
  });
  t.join();
}

}  // namespace
}  // namespace hqekv::server
