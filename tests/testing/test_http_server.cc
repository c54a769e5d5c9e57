#include "tests/testing/test_http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace pdc::testing {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

struct TestHttpServer::State {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<ssl::context> tls;
};

TestHttpServer::TestHttpServer(Handler handler,
                               std::optional<TestTlsConfig> tls)
    : handler_(std::move(handler)), state_(std::make_unique<State>()) {
  if (tls.has_value()) {
    state_->tls.emplace(ssl::context::tls_server);
    state_->tls->use_certificate_chain(
        net::buffer(tls->cert_pem.data(), tls->cert_pem.size()));
    state_->tls->use_private_key(
        net::buffer(tls->key_pem.data(), tls->key_pem.size()),
        ssl::context::pem);
  }
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(ep.protocol());
  state_->acceptor.set_option(net::socket_base::reuse_address(true));
  state_->acceptor.bind(ep);
  state_->acceptor.listen();
  port_ = state_->acceptor.local_endpoint().port();
  acceptor_thread_ = std::thread([this] { AcceptLoop(); });
}

TestHttpServer::~TestHttpServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Wakes connection threads blocked in read().
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  {
    // Wakes the acceptor blocked in accept().
    net::io_context ioc;
    tcp::socket s(ioc);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
  }
  acceptor_thread_.join();
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

std::string TestHttpServer::url() const {
  return std::string(state_->tls ? "https" : "http") +
         "://127.0.0.1:" + std::to_string(port_);
}

int TestHttpServer::connections() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

std::vector<TestRequest> TestHttpServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void TestHttpServer::AcceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket(state_->ioc);
    state_->acceptor.accept(socket, ec);
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    if (ec) continue;
    const int connection = ++connections_;
    const int fd = socket.release();
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd, connection] { Serve(fd, connection); });
  }
}

void TestHttpServer::Serve(int fd, int connection) {
  // Forgets fd while its socket still owns it, so the destructor's
  // shutdown() never hits a descriptor number reused by someone else.
  auto forget = [&] {
    absl::MutexLock lock(&mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd),
                    open_fds_.end());
  };
  net::io_context ioc;
  if (state_->tls) {
    ssl::stream<tcp::socket> stream(ioc, *state_->tls);
    stream.next_layer().assign(tcp::v4(), fd);
    boost::system::error_code ec;
    stream.handshake(ssl::stream_base::server, ec);
    if (!ec) ServeStream(stream, connection);
    forget();
  } else {
    tcp::socket socket(ioc, tcp::v4(), fd);
    ServeStream(socket, connection);
    forget();
  }
}

template <typename Stream>
void TestHttpServer::ServeStream(Stream& socket, int connection) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    boost::system::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    TestRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.body = req.body();
    r.authorization = std::string(req[http::field::authorization]);
    r.content_type = std::string(req[http::field::content_type]);
    r.connection = connection;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(r);
    }
    const TestReply reply = handler_(r);
    if (reply.hang) {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&stopping_));
      break;
    }
    if (reply.drop) break;
    if (!reply.chunks.empty()) {
      // Chunked transfer, one chunk per write (a watch's events).
      http::response<http::empty_body> head{static_cast<http::status>(reply.status), 11};
      head.set(http::field::content_type, reply.content_type);
      head.chunked(true);
      http::response_serializer<http::empty_body> sr{head};
      http::write_header(socket, sr, ec);
      for (const std::string& chunk : reply.chunks) {
        if (ec) break;
        net::write(socket, http::make_chunk(net::buffer(chunk)), ec);
      }
      if (ec) break;
      if (reply.hold_open) {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&stopping_));
        break;
      }
      net::write(socket, http::make_chunk_last(), ec);
      if (ec) break;
      continue;
    }
    http::response<http::string_body> res{
        static_cast<http::status>(reply.status), 11};
    res.set(http::field::content_type, reply.content_type);
    res.keep_alive(true);
    res.body() = reply.body;
    res.prepare_payload();
    http::write(socket, res, ec);
    if (ec || reply.close_after) break;
  }
}

}  // namespace pdc::testing
