#include "net/tls_reloader.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "boost/beast/core/error.hpp"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::net {

namespace ssl = boost::asio::ssl;

absl::Status TlsReloader::Load() {
  const Stamps stamps = StampsNow();
  absl::StatusOr<std::shared_ptr<ssl::context>> c = Build();
  if (!c.ok()) return c.status();
  current_ = *std::move(c);
  loaded_ = stamps;
  last_check_ = clock_->Now();
  return absl::OkStatus();
}

std::shared_ptr<ssl::context> TlsReloader::Current() {
  const absl::Time now = clock_->Now();
  // A wall clock set back does not postpone the next look.
  if (now >= last_check_ && now - last_check_ < o_.reload_interval) return current_;
  last_check_ = now;
  const Stamps stamps = StampsNow();
  if (stamps == loaded_ || stamps == failed_) return current_;
  absl::StatusOr<std::shared_ptr<ssl::context>> c = Build();
  if (!c.ok()) {
    failed_ = stamps;
    spdlog::error("TLS certificate change not applied, still serving the previous one: {}",
                  StdSv(c.status().message()));
    return current_;
  }
  current_ = *std::move(c);
  loaded_ = stamps;
  failed_ = Stamps{};
  spdlog::info("TLS certificate reloaded from {} and {}", o_.cert_file, o_.key_file);
  return current_;
}

TlsReloader::Stamp TlsReloader::StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Stamp{};
  return Stamp{st.st_dev, st.st_ino,
               int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
               static_cast<int64_t>(st.st_size)};
}

TlsReloader::Stamps TlsReloader::StampsNow() const {
  return Stamps{StampOf(o_.cert_file), StampOf(o_.key_file),
                o_.client_ca_file.empty() ? Stamp{} : StampOf(o_.client_ca_file)};
}

absl::StatusOr<std::shared_ptr<ssl::context>> TlsReloader::Build() const {
  auto tls = std::make_shared<ssl::context>(ssl::context::tls_server);
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                   ssl::context::no_tlsv1_1);
  boost::beast::error_code ec;
  tls->use_certificate_chain_file(o_.cert_file, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.certFile ", o_.cert_file, ": ", ec.message()));
  }
  // Also checks that the key belongs to the certificate.
  tls->use_private_key_file(o_.key_file, ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.keyFile ", o_.key_file, ": ", ec.message()));
  }
  if (!o_.client_ca_file.empty()) {
    tls->load_verify_file(o_.client_ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls.clientCAFile ", o_.client_ca_file, ": ", ec.message()));
    }
    // A certificate is optional at the TLS layer (node drivers and
    // people use the bearer token); one that is presented must verify.
    tls->set_verify_mode(ssl::verify_peer);
  }
  return tls;
}

}  // namespace pdc::net
