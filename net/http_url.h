// Base URLs of the pdc HTTP client: `http://host[:port][/prefix]` or
// `https://…`. Parsed once when a client is made; request targets are
// appended to the prefix.
// Thread-safety: pure functions over value types.
#ifndef PDC_NET_HTTP_URL_H_
#define PDC_NET_HTTP_URL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pdc {

struct BaseUrl {
  bool tls = false;         // https
  std::string host;         // "127.0.0.1", "pdc.example", "::1" (no brackets)
  uint16_t port = 0;        // 80 / 443 when the URL names none
  std::string path_prefix;  // "" or "/api" (no trailing slash)

  // "host:port" for the Host header ("[::1]:8888" for IPv6).
  std::string HostHeader() const;
  // The normalised URL, e.g. "http://127.0.0.1:8888", for messages.
  std::string ToString() const;
};

// InvalidArgument naming the problem, e.g.
// `"ftp://x" is not an http:// or https:// URL`.
absl::StatusOr<BaseUrl> ParseBaseUrl(std::string_view url);

// `s` as one path segment or query value (RFC 3986): unreserved characters
// as they are, every other byte as %XX.
std::string PercentEncode(std::string_view s);

}  // namespace pdc

#endif  // PDC_NET_HTTP_URL_H_
