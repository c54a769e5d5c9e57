#include "tests/testing/http_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing {
namespace {

int MillisUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpStream>> HttpStream::Open(
    uint16_t port, std::string_view method, std::string_view target,
    std::string_view body,
    std::vector<std::pair<std::string, std::string>> headers,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(Cat("socket: ", std::strerror(errno)));
  }
  std::unique_ptr<HttpStream> s(new HttpStream(fd));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return absl::UnavailableError(
        Cat("cannot connect to 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string req =
      Cat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
          "\r\nAccept: application/json\r\n");
  for (const auto& [k, v] : headers) Append(&req, k, ": ", v, "\r\n");
  if (!body.empty() || method == "POST" || method == "PUT") {
    Append(&req,
           "Content-Type: application/json\r\nContent-Length: ", body.size(),
           "\r\n");
  }
  Append(&req, "\r\n", body);
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n =
        ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return absl::UnavailableError(
          Cat("sending ", method, " ", target, ": ", std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  // Status line and headers.
  size_t end;
  while ((end = s->raw_.find("\r\n\r\n")) == std::string::npos) {
    absl::Status st = s->Fill(deadline);
    if (!st.ok()) {
      return absl::Status(
          st.code(),
          Cat(method, " ", target, ": no response headers: ", st.message()));
    }
    if (s->eof_) {
      return absl::UnavailableError(
          Cat(method, " ", target,
              ": connection closed before the response headers"));
    }
  }
  const std::string head = s->raw_.substr(0, end);
  s->raw_.erase(0, end + 4);
  std::vector<std::string_view> lines = Split(head, "\r\n");
  std::vector<std::string_view> status_line =
      Split(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !StartsWith(status_line[0], "HTTP/1.") ||
      !Atoi(status_line[1], &s->status_)) {
    return absl::UnavailableError(
        Cat(method, " ", target, ": bad status line \"", lines[0], "\""));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    s->headers_.emplace_back(std::string(lines[i].substr(0, colon)),
                             std::string(Strip(lines[i].substr(colon + 1))));
  }
  if (IEquals(s->Header("Transfer-Encoding"), "chunked")) {
    s->chunked_ = true;
  } else if (const std::string len = s->Header("Content-Length");
             !len.empty()) {
    uint64_t n = 0;
    if (!Atoi(len, &n)) {
      return absl::UnavailableError(Cat("bad Content-Length \"", len, "\""));
    }
    s->remaining_ = n;
  }
  if (absl::Status st = s->Decode(); !st.ok()) return st;
  return s;
}

HttpStream::~HttpStream() {
  if (fd_ >= 0) ::close(fd_);
}

std::string HttpStream::Header(std::string_view name) const {
  for (const auto& [k, v] : headers_) {
    if (IEquals(k, name)) return v;
  }
  return "";
}

void HttpStream::Cancel() {
  cancelled_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

absl::Status HttpStream::Fill(absl::Time deadline) {
  if (cancelled_) return absl::UnavailableError("stream cancelled");
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, MillisUntil(deadline));
  if (r == 0) return absl::DeadlineExceededError("no data before the deadline");
  if (r < 0) return absl::UnavailableError(Cat("poll: ", std::strerror(errno)));
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (cancelled_) return absl::UnavailableError("stream cancelled");
  if (n < 0) return absl::UnavailableError(Cat("recv: ", std::strerror(errno)));
  if (n == 0) eof_ = true;
  raw_.append(buf, static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::Status HttpStream::Decode() {
  if (!chunked_) {
    if (remaining_.has_value()) {
      const size_t take = std::min<uint64_t>(*remaining_, raw_.size());
      decoded_.append(raw_, 0, take);
      raw_.erase(0, take);
      *remaining_ -= take;
      if (*remaining_ == 0) done_ = true;
    } else {
      decoded_ += raw_;
      raw_.clear();
      if (eof_) done_ = true;
    }
    return absl::OkStatus();
  }
  while (!done_) {
    if (in_chunk_) {
      const size_t take = std::min<uint64_t>(chunk_left_, raw_.size());
      decoded_.append(raw_, 0, take);
      raw_.erase(0, take);
      chunk_left_ -= take;
      if (chunk_left_ > 0) return absl::OkStatus();
      if (raw_.size() < 2) return absl::OkStatus();
      raw_.erase(0, 2);  // CRLF after the chunk data.
      in_chunk_ = false;
      continue;
    }
    const size_t eol = raw_.find("\r\n");
    if (eol == std::string::npos) return absl::OkStatus();
    std::string_view size_text = std::string_view(raw_).substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));  // Chunk extensions.
    uint64_t size = 0;
    if (!HexAtoi(Strip(size_text), &size)) {
      return absl::UnavailableError(
          Cat("bad chunk size line \"", size_text, "\""));
    }
    raw_.erase(0, eol + 2);
    if (size == 0) {
      done_ = true;  // Trailers, if any, are ignored.
      return absl::OkStatus();
    }
    chunk_left_ = size;
    in_chunk_ = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> HttpStream::ReadLine(
    absl::Time deadline) {
  for (;;) {
    size_t eol;
    while ((eol = decoded_.find('\n')) != std::string::npos) {
      std::string line = decoded_.substr(0, eol);
      decoded_.erase(0, eol + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) return std::optional<std::string>(std::move(line));
    }
    if (done_) {
      if (!decoded_.empty()) {
        std::string last = std::move(decoded_);
        decoded_.clear();
        return std::optional<std::string>(std::move(last));
      }
      return std::optional<std::string>();
    }
    if (eof_)
      return absl::UnavailableError(
          "connection closed in the middle of the body");
    if (absl::Status st = Fill(deadline); !st.ok()) return st;
    if (absl::Status st = Decode(); !st.ok()) return st;
  }
}

absl::StatusOr<std::string> HttpStream::ReadAll(absl::Time deadline) {
  while (!done_) {
    if (eof_)
      return absl::UnavailableError(
          "connection closed in the middle of the body");
    if (absl::Status st = Fill(deadline); !st.ok()) return st;
    if (absl::Status st = Decode(); !st.ok()) return st;
  }
  std::string out = std::move(decoded_);
  decoded_.clear();
  return out;
}

}  // namespace pdc::testing
