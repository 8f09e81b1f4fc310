// Connection-level limits that cpp-httplib 0.11.4 does not enforce itself:
// a deadline for a whole request header and for a whole body (a client
// sending one byte a second passes every per-read timeout), a bound on the
// bytes read while a header is still incomplete (a header flood), and
// "has the client gone?" for a handler that is not streaming.
//
// httplib hands its task queue an opaque job per accepted socket. The
// listener thread calls Identify() right after accept (from the task
// queue's enqueue): it finds the new connection's descriptor among the
// process's sockets (the TCP socket whose local port is the server's and
// whose inode is not watched yet) and keeps a dup of it, so the number it
// uses is never reused by another connection while watched. The worker
// thread serving the connection marks its phase (Begin, HeaderDone,
// Serving, ResponseDone, End); a watchdog thread shuts down (SHUT_RDWR) the
// socket of a connection past its phase's deadline or byte bound, which ends
// httplib's blocked read at once. Linux only (/proc/self/fd, TCP_INFO).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace hqekv::server {

struct ConnectionLimits {
  // From the connection's start, or from its previous response, to the end
  // of the next request's header (keep-alive idle time included).
  std::chrono::milliseconds header_deadline{10000};
  // From the end of the header to the handler (the whole body read).
  std::chrono::milliseconds body_deadline{30000};
  // Bytes httplib may read from the socket while a header is incomplete
  // (100 header lines of httplib's 8 KiB line limit, plus its read-ahead).
  int64_t max_header_bytes = 1 << 20;
  // How often the watchdog looks.
  std::chrono::milliseconds tick{20};
};

// Closed by the watchdog, by cause (for /metrics and tests).
struct ConnectionLimitCounters {
  int64_t header_deadline = 0, body_deadline = 0, header_bytes = 0;
  int64_t unidentified = 0;  // connections Identify could not find (not watched)
};

class ConnectionWatch {
 public:
  // `listen_port`: the server's bound port.
  ConnectionWatch(int listen_port, ConnectionLimits limits);
  ~ConnectionWatch();
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;

  // Listener thread, right after a connection was accepted and before it is
  // served: an id for Begin, or -1 when the descriptor was not found.
  // `peer` gets the client's address (without port; "" when not found).
  int64_t Identify(std::string* peer);

  // The worker thread serving connection `id` (from Identify; -1: none).
  void Begin(int64_t id);
  void End();
  // On the worker thread, for the connection it serves (nothing when it
  // serves none): the pre-routing handler saw a complete header (`body`: one
  // follows); a route's handler runs (any body has been read); the response
  // was written (the next header's deadline starts).
  static void HeaderDone(bool body);
  static void Serving();
  static void ResponseDone();

  ConnectionLimitCounters Counters() const;
  const ConnectionLimits& limits() const { return limits_; }

 private:
  enum class Phase { kHeader, kBody, kServing };
  struct Conn {
    int fd = -1;  // our dup of httplib's descriptor
    uint64_t inode = 0;
    Phase phase = Phase::kHeader;
    std::chrono::steady_clock::time_point deadline;
    int64_t read_at_phase_start = 0;  // bytes the application had read
    bool closed = false;              // shut down by the watchdog
  };
  void Enter(Phase p, std::chrono::milliseconds deadline);
  void Loop();

  const int port_;
  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Conn> conns_;
  int64_t next_id_ = 0;
  ConnectionLimitCounters counters_;
  bool stop_ = false;
  std::thread thread_;
};

// Bytes the application has read from a TCP socket (received minus still
// queued), or -1 when the kernel does not say.
int64_t SocketBytesRead(int fd);

// True when the peer of `fd` has closed its side or reset the connection
// (a non-blocking peek reads end-of-stream or an error). Data the client
// sent ahead (a pipelined request) counts as alive.
bool PeerClosed(int fd);

// The connection the calling worker thread serves (ConnectionWatch::Begin):
// true when its client has gone. False when the thread serves no watched
// connection.
bool CurrentClientGone();

}  // namespace hqekv::server
