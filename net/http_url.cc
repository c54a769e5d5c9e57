#include "net/http_url.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"

namespace pdc {

std::string BaseUrl::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

std::string BaseUrl::ToString() const {
  return absl::StrCat(tls ? "https://" : "http://", HostHeader(), path_prefix);
}

absl::StatusOr<BaseUrl> ParseBaseUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Sv(url), "\" ", Sv(why)));
  };
  BaseUrl out;
  std::string_view rest = url;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    out.tls = true;
  } else {
    return bad("is not an http:// or https:// URL");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash);
    while (prefix.ends_with("/")) prefix.remove_suffix(1);
    out.path_prefix = std::string(prefix);
  }
  if (authority.find('@') != std::string_view::npos) {
    return bad("must not carry user information; use a token file");
  }
  std::string_view port_text;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unclosed [");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("has junk after ]");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("has an empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return bad("has an empty port");
    }
  }
  if (out.host.empty()) return bad("has no host");
  if (!port_text.empty()) {
    int port = 0;
    if (!std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(Sv(port_text), &port) || port < 1 || port > 65535) {
      return bad("has an invalid port");
    }
    out.port = static_cast<uint16_t>(port);
  } else {
    out.port = out.tls ? 443 : 80;
  }
  return out;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%%%02X", c));  // Upper case, as RFC 3986 advises.
    }
  }
  return out;
}

}  // namespace pdc
