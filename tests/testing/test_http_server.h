// A tiny blocking HTTP/1.1 server on 127.0.0.1:<port 0> for client tests:
// one thread per connection, keep-alive, and knobs to misbehave (close a
// kept-alive connection after answering, never answer).
// Thread-safety: all public methods are thread-safe.
#ifndef PDC_TESTS_TESTING_TEST_HTTP_SERVER_H_
#define PDC_TESTS_TESTING_TEST_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pdc::testing {

struct TestRequest {
  std::string method;
  std::string target;
  std::string body;
  std::string authorization;
  std::string content_type;
  int connection = 0;  // 1-based index of the connection it arrived on.
};

struct TestReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // Answer with "Connection: keep-alive", then close the socket anyway (a
  // server dropping an idle kept-alive connection).
  bool close_after = false;
  // Close the connection without answering, after reading the request (a
  // server that crashed, or a proxy that dropped the connection, after the
  // request may have taken effect).
  bool drop = false;
  // Non-empty: the body is sent in these chunks (chunked transfer), each
  // its own write; with `hold_open` the last chunk is never sent and the
  // connection held until the server is destroyed (an endless watch).
  std::vector<std::string> chunks = {};
  bool hold_open = false;
  // Never answer; the connection is held until the server is destroyed.
  bool hang = false;
};

// PEM certificate chain and key: the server speaks HTTPS.
struct TestTlsConfig {
  std::string cert_pem;
  std::string key_pem;
};

class TestHttpServer {
 public:
  using Handler = std::function<TestReply(const TestRequest&)>;
  explicit TestHttpServer(Handler handler,
                          std::optional<TestTlsConfig> tls = std::nullopt);
  ~TestHttpServer();

  uint16_t port() const { return port_; }
  std::string url() const;  // http(s)://127.0.0.1:<port>
  int connections() const;
  std::vector<TestRequest> requests() const;

 private:
  struct State;
  void AcceptLoop();
  void Serve(int fd, int connection);
  template <typename Stream>
  void ServeStream(Stream& stream, int connection);

  Handler handler_;
  std::unique_ptr<State> state_;
  uint16_t port_ = 0;
  std::thread acceptor_thread_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int connections_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<TestRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_TEST_HTTP_SERVER_H_
