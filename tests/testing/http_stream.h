// HttpStream: one HTTP/1.1 request over a plain loopback TCP connection whose
// response body is read incrementally, one line at a time, for streaming
// APIs: etcd's v3 JSON gateway watch (POST /v3/watch) and kube-apiserver
// watches (GET ...?watch=1). Both answer with a chunked body of
// newline-delimited JSON objects that never ends on its own.
//
//   ASSIGN_OR_RETURN(auto s, HttpStream::Open(port, "POST", "/v3/watch",
//   body)); ASSIGN_OR_RETURN(std::optional<std::string> line,
//   s->ReadLine(deadline));
//
// The body may be chunked (Transfer-Encoding: chunked), sized
// (Content-Length) or end with the connection; ReadLine hides which.
// Thread-safety: one reader thread; Cancel() may be called from any thread
// and makes a blocked ReadLine return.
#ifndef PDC_TESTS_TESTING_HTTP_STREAM_H_
#define PDC_TESTS_TESTING_HTTP_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdc::testing {

class HttpStream {
 public:
  // Connects to 127.0.0.1:port, sends the request (with Content-Type
  // application/json when there is a body, and `headers`), and reads the
  // status line and headers. Unavailable when the connection fails or closes
  // before the headers; DeadlineExceeded past `timeout`.
  static absl::StatusOr<std::unique_ptr<HttpStream>> Open(
      uint16_t port, std::string_view method, std::string_view target,
      std::string_view body = {},
      std::vector<std::pair<std::string, std::string>> headers = {},
      absl::Duration timeout = absl::Seconds(10));
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  int status() const { return status_; }
  // First header with this name (case-insensitive), "" when absent.
  std::string Header(std::string_view name) const;

  // The next line of the body, without its '\n' (a last line without one is
  // returned too). nullopt: the body ended cleanly (final chunk, or the
  // announced length). Unavailable: the connection closed mid-body or was
  // cancelled. DeadlineExceeded: nothing complete arrived before `deadline`
  // (the stream stays usable). Empty lines are skipped.
  absl::StatusOr<std::optional<std::string>> ReadLine(absl::Time deadline);
  // The rest of the body until it ends (for non-streaming answers).
  absl::StatusOr<std::string> ReadAll(absl::Time deadline);

  // Shuts the socket down: a blocked ReadLine returns Unavailable.
  void Cancel();
  // The socket, for poll() next to other descriptors; -1 once closed.
  int fd() const { return fd_; }
  // True when bytes of the body are already buffered (poll() on fd() would
  // not see them).
  bool HasBufferedData() const { return !decoded_.empty() || !raw_.empty(); }

 private:
  explicit HttpStream(int fd) : fd_(fd) {}
  // Reads more bytes into raw_ (waiting until `deadline`).
  absl::Status Fill(absl::Time deadline);
  // Moves whatever body bytes raw_ holds into decoded_; sets done_ at the end.
  absl::Status Decode();

  int fd_ = -1;
  std::atomic<bool> cancelled_{false};
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
  bool chunked_ = false;
  std::optional<uint64_t> remaining_;  // Content-Length left, when sized.
  uint64_t chunk_left_ = 0;            // Bytes left in the current chunk.
  bool in_chunk_ = false;
  bool done_ = false;
  bool eof_ = false;
  std::string raw_;      // Received, not yet decoded.
  std::string decoded_;  // Body bytes not yet returned.
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_HTTP_STREAM_H_
