// TlsReloader: a TLS server context that follows its files on disk, for
// net/'s HTTP server (and any other TLS listener).
#ifndef PDC_NET_TLS_RELOADER_H_
#define PDC_NET_TLS_RELOADER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/ssl.hpp"
#include "common/clock.h"

namespace pdc::net {

// What a TLS listener serves: PEM files, and how often to look at them.
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // Verifies client certificates when set.
  absl::Duration reload_interval = absl::Seconds(1);
};

// The server's TLS context, built again when its certificate, key or
// client CA file changes on disk (a rotated Secret: kubelet swaps the files
// by a symlink, so the inode changes; an edit in place changes the mtime or
// size). Looked at
// when a connection is accepted, at most once per reload_interval. A new
// pair that does not load (a certificate written before its key) is logged
// once and the old context kept; it is tried again when either file changes
// once more. Connections keep the context they were accepted with.
// Thread-safety: one thread at a time (the HTTP server calls it on its
// acceptor's strand).
class TlsReloader {
 public:
  explicit TlsReloader(TlsFiles files, const Clock* clock = RealClock())
      : o_(std::move(files)), clock_(clock) {}

  // The first load; an error names the file.
  absl::Status Load();

  std::shared_ptr<boost::asio::ssl::context> Current();

 private:
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    int64_t mtime_ns = 0;
    int64_t size = -1;  // -1: could not stat.
    bool operator==(const Stamp&) const = default;
  };
  struct Stamps {
    Stamp cert;
    Stamp key;
    Stamp client_ca;  // Unset without tls.clientCAFile.
    bool operator==(const Stamps&) const = default;
  };
  static Stamp StampOf(const std::string& path);
  Stamps StampsNow() const;

  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> Build() const;

  const TlsFiles o_;
  const Clock* const clock_;
  std::shared_ptr<boost::asio::ssl::context> current_;
  Stamps loaded_;
  Stamps failed_;
  absl::Time last_check_ = absl::InfinitePast();
};

}  // namespace pdc::net

#endif  // PDC_NET_TLS_RELOADER_H_
