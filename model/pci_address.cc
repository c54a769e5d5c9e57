#include "model/pci_address.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc {
namespace {

// Reads `n` hex digits at text[pos]; -1 when any is not a hex digit.
int ReadHex(std::string_view text, size_t pos, size_t n) {
  return static_cast<int>(ParseFixedHex(text.substr(pos, n), n));
}

absl::Status Invalid(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid PCI address ", model::QuoteForMessage(text), ": ", Sv(why),
                   " (want DDDD:BB:DD.F in hex, e.g. 0000:3b:00.0)"));
}

}  // namespace

absl::StatusOr<PciAddress> PciAddress::Parse(std::string_view text) {
  // 0000:3b:00.0
  // 0123456789ab
  if (text.size() != 12) return Invalid(text, "wrong length");
  if (text[4] != ':' || text[7] != ':' || text[10] != '.') {
    return Invalid(text, "separators must be ':' ':' '.'");
  }
  const int domain = ReadHex(text, 0, 4);
  const int bus = ReadHex(text, 5, 2);
  const int device = ReadHex(text, 8, 2);
  const int function = ReadHex(text, 11, 1);
  if (domain < 0 || bus < 0 || device < 0 || function < 0) {
    return Invalid(text, "non-hex digit");
  }
  if (device > 0x1f) return Invalid(text, "device number above 1f");
  if (function > 7) return Invalid(text, "function number above 7");
  return PciAddress(static_cast<uint16_t>(domain), static_cast<uint8_t>(bus),
                    static_cast<uint8_t>(device),
                    static_cast<uint8_t>(function));
}

std::string PciAddress::ToString() const {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain(), bus(),
                device(), function());
  return buf;
}

}  // namespace pdc
