#include "server/http_limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/sockios.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace hqekv::server {
namespace {

// The watched connection the calling thread serves.
struct CurrentConn {
  ConnectionWatch* watch = nullptr;
  int64_t id = -1;
  int fd = -1;
};
thread_local CurrentConn tl_conn;

int LocalPort(int fd) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return -1;
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return -1;
}

// The peer's address without the port, or "" when not connected.
std::string PeerAddress(int fd) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  const void* src = a.ss_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&a)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr);
  if (!inet_ntop(a.ss_family, src, buf, sizeof(buf))) return "?";
  return buf;
}

}  // namespace

// glibc's struct tcp_info stops before the kernel's byte counters (Linux
// 4.1+); the kernel's layout only ever grows at its end, so they follow it.
struct TcpInfoWithBytes {
  tcp_info base;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
};
static_assert(sizeof(tcp_info) % 8 == 0, "the kernel's u64 counters follow tcp_info unpadded");

int64_t SocketBytesRead(int fd) {
  TcpInfoWithBytes info{};
  socklen_t n = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &n) != 0 ||
      n < offsetof(TcpInfoWithBytes, bytes_received) + sizeof(info.bytes_received))
    return -1;
  // Received first, queued second: bytes arriving in between make the
  // estimate smaller, never larger.
  int queued = 0;
  if (ioctl(fd, SIOCINQ, &queued) != 0) return -1;
  return static_cast<int64_t>(info.bytes_received) - queued;
}

bool PeerClosed(int fd) {
  char c;
  const ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) return false;
  if (r == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

bool CurrentClientGone() { return tl_conn.fd >= 0 && PeerClosed(tl_conn.fd); }

ConnectionWatch::ConnectionWatch(int listen_port, ConnectionLimits limits)
    : port_(listen_port), limits_(limits) {
  thread_ = std::thread([this] { Loop(); });
}

ConnectionWatch::~ConnectionWatch() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& [id, c] : conns_) close(c.fd);
}

int64_t ConnectionWatch::Identify(std::string* peer) {
  peer->clear();
  std::set<uint64_t> known;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, c] : conns_) known.insert(c.inode);
  }
  // The new connection: a connected TCP socket on the server's port that no
  // watched connection holds. Only the listener thread accepts, and it calls
  // this before accepting the next one, so there is exactly one.
  int found = -1;
  uint64_t found_inode = 0;
  int candidates = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    const int self = dirfd(d);
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == self) continue;
      struct stat st {};
      if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
      if (known.count(st.st_ino)) continue;
      if (LocalPort(static_cast<int>(fd)) != port_) continue;
      std::string addr = PeerAddress(static_cast<int>(fd));
      if (addr.empty()) continue;  // the listening socket
      ++candidates;
      *peer = std::move(addr);
      found = static_cast<int>(fd);
      found_inode = st.st_ino;
    }
    closedir(d);
  }
  std::lock_guard<std::mutex> l(mu_);
  if (candidates != 1) {
    peer->clear();
    ++counters_.unidentified;
    return -1;
  }
  const int dup = fcntl(found, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    ++counters_.unidentified;
    return -1;
  }
  Conn c;
  c.fd = dup;
  c.inode = found_inode;
  c.deadline = std::chrono::steady_clock::now() + limits_.header_deadline;
  c.read_at_phase_start = 0;
  const int64_t id = next_id_++;
  conns_.emplace(id, c);
  return id;
}

void ConnectionWatch::Begin(int64_t id) {
  tl_conn = CurrentConn{};
  if (id < 0) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  tl_conn = CurrentConn{this, id, it->second.fd};
}

void ConnectionWatch::End() {
  if (tl_conn.watch != this) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = conns_.find(tl_conn.id);
    if (it != conns_.end()) {
      close(it->second.fd);
      conns_.erase(it);
    }
  }
  tl_conn = CurrentConn{};
}

void ConnectionWatch::Enter(Phase p, std::chrono::milliseconds deadline) {
  if (tl_conn.watch != this) return;
  const int64_t read = p == Phase::kHeader ? SocketBytesRead(tl_conn.fd) : 0;
  std::lock_guard<std::mutex> l(mu_);
  auto it = conns_.find(tl_conn.id);
  if (it == conns_.end()) return;
  it->second.phase = p;
  it->second.deadline = std::chrono::steady_clock::now() + deadline;
  it->second.read_at_phase_start = read;
}

void ConnectionWatch::HeaderDone(bool body) {
  if (ConnectionWatch* w = tl_conn.watch)
    w->Enter(body ? Phase::kBody : Phase::kServing, w->limits_.body_deadline);
}
void ConnectionWatch::Serving() {
  if (ConnectionWatch* w = tl_conn.watch) w->Enter(Phase::kServing, w->limits_.body_deadline);
}
void ConnectionWatch::ResponseDone() {
  if (ConnectionWatch* w = tl_conn.watch) w->Enter(Phase::kHeader, w->limits_.header_deadline);
}

ConnectionLimitCounters ConnectionWatch::Counters() const {
  std::lock_guard<std::mutex> l(mu_);
  return counters_;
}

void ConnectionWatch::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, limits_.tick);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, c] : conns_) {
      if (c.closed || c.phase == Phase::kServing) continue;
      int64_t* cause = nullptr;
      if (now > c.deadline) {
        cause = c.phase == Phase::kHeader ? &counters_.header_deadline : &counters_.body_deadline;
      } else if (c.phase == Phase::kHeader) {
        const int64_t read = SocketBytesRead(c.fd);
        if (read >= 0 && read - c.read_at_phase_start > limits_.max_header_bytes)
          cause = &counters_.header_bytes;
      }
      if (!cause) continue;
      // Ends httplib's read of this connection at once (it then closes it);
      // our dup keeps the descriptor number from being reused meanwhile.
      shutdown(c.fd, SHUT_RDWR);
      c.closed = true;
      ++*cause;
    }
  }
}

}  // namespace hqekv::server
