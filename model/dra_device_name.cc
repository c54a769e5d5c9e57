#include "model/dra_device_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"

namespace pdc::model {
namespace {

// Room for "-" and 8 hex digits in a 63-character label.
constexpr size_t kDraNamePrefixMax = 54;

}  // namespace

std::string DraDeviceNameFromSerial(std::string_view serial) {
  if (serial.empty()) return "";
  std::string prefix;
  for (char c : serial) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u)) {
      prefix.push_back(absl::ascii_tolower(u));
    } else if (!prefix.empty() && prefix.back() != '-') {
      prefix.push_back('-');
    }
    if (prefix.size() >= kDraNamePrefixMax) break;
  }
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  const std::string hash = absl::StrFormat("%08x", crc32c::Value(serial));
  if (prefix.empty()) return absl::StrCat("dev-", hash);
  return absl::StrCat(prefix, "-", hash);
}

}  // namespace pdc::model
