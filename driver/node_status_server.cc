#include "driver/node_status_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace pdc::driver {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class ServerImpl : public StatusServer {
 public:
  ServerImpl(tcp::acceptor acceptor, std::unique_ptr<asio::io_context> io, Handler handler)
      : io_(std::move(io)), acceptor_(std::move(acceptor)), handler_(std::move(handler)) {
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_->run(); });
  }
  ~ServerImpl() override { Stop(); }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (!thread_.joinable()) return;
    asio::post(*io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    io_->stop();
    thread_.join();
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;  // Closed.
      Serve(std::move(socket));
      Accept();
    });
  }

  void Serve(tcp::socket socket) {
    timeval tv{5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    beast::error_code ec;
    http::read(socket, buffer, parser, ec);
    if (ec) return;
    const auto& req = parser.get();
    StatusRequest in{std::string(req.method_string()), std::string(req.target()), req.body()};
    StatusResponse out = handler_(in);
    http::response<http::string_body> res{static_cast<http::status>(out.status), req.version()};
    res.set(http::field::content_type, out.content_type);
    res.set(http::field::connection, "close");
    res.body() = std::move(out.body);
    res.prepare_payload();
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  std::unique_ptr<asio::io_context> io_;
  tcp::acceptor acceptor_;
  Handler handler_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StatusServer>> StatusServer::Start(const std::string& listen,
                                                                  Handler handler) {
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("listen address \"", listen, "\" is not host:port"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  beast::error_code ec;
  const auto address = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("listen address \"", listen, "\": ", ec.message()));
  auto io = std::make_unique<asio::io_context>(1);
  tcp::acceptor acceptor(*io);
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("listen on ", listen, ": ", ec.message()));
  return std::unique_ptr<StatusServer>(
      new ServerImpl(std::move(acceptor), std::move(io), std::move(handler)));
}

}  // namespace pdc::driver
