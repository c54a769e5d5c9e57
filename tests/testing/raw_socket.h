// A blocking loopback TCP socket for tests that must misbehave at the byte
// level (trickle headers, send oversized bodies, watch the server close).
// Reads wait on the server with a receive timeout; they never sleep.
#ifndef PDC_TESTS_TESTING_RAW_SOCKET_H_
#define PDC_TESTS_TESTING_RAW_SOCKET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace pdc::testing {

class RawSocket {
 public:
  explicit RawSocket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    timeval tv{10, 0};  // Upper bound; the server's timers fire far sooner.
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  bool Send(std::string_view data) {
    return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(data.size());
  }
  // Everything until the server closes (or the 10 s bound passes, which
  // sets *timed_out).
  std::string ReadUntilClose(bool* timed_out = nullptr) {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (timed_out) *timed_out = n < 0;
      return out;
    }
  }
  // Reads until `needle` shows up (or close / timeout).
  std::string ReadUntil(std::string_view needle) {
    std::string out;
    char buf[4096];
    while (out.find(needle) == std::string::npos) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_RAW_SOCKET_H_
