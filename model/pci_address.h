// PCI function address in the kernel's canonical form `DDDD:BB:DD.F`
// (domain:bus:device.function, lower-case hex), e.g. `0000:3b:00.0`.
// It is the identity of a device on its node. Packed into 32 bits so that a
// device record stays small and addresses order the way `lspci` lists them.
// Thread-safety: value type.
#ifndef PDC_MODEL_PCI_ADDRESS_H_
#define PDC_MODEL_PCI_ADDRESS_H_

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pdc {

class PciAddress {
 public:
  constexpr PciAddress() = default;
  // REQUIRES: device <= 0x1f, function <= 7.
  constexpr PciAddress(uint16_t domain, uint8_t bus, uint8_t device,
                       uint8_t function)
      : packed_((uint32_t{domain} << 16) | (uint32_t{bus} << 8) |
                (uint32_t{device} << 3) | function) {}

  // Parses `DDDD:BB:DD.F` (hex digits, either case). Anything else is
  // InvalidArgument with a message that quotes the input and shows the form.
  static absl::StatusOr<PciAddress> Parse(std::string_view text);

  static constexpr PciAddress FromPacked(uint32_t packed) {
    PciAddress a;
    a.packed_ = packed;
    return a;
  }

  uint16_t domain() const { return static_cast<uint16_t>(packed_ >> 16); }
  uint8_t bus() const { return static_cast<uint8_t>(packed_ >> 8); }
  uint8_t device() const { return (packed_ >> 3) & 0x1f; }
  uint8_t function() const { return packed_ & 0x7; }
  uint32_t packed() const { return packed_; }

  // Canonical lower-case form, e.g. "0000:3b:00.0".
  std::string ToString() const;

  friend constexpr auto operator<=>(PciAddress, PciAddress) = default;

  template <typename H>
  friend H AbslHashValue(H h, PciAddress a) {
    return H::combine(std::move(h), a.packed_);
  }

 private:
  uint32_t packed_ = 0;
};

}  // namespace pdc

#endif  // PDC_MODEL_PCI_ADDRESS_H_
