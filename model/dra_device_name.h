// The name pdc-node's DRA driver gives a device in its ResourceSlices, from
// the device's serial: pdc-node publishes under it, and pdc-extender matches
// a ResourceClaim's allocated device back to its inventory with it. A device
// is named from its serial, never its address, so a PCI renumbering keeps
// its name: a DNS label made of the serial's lower-cased letters and digits
// (other characters become '-') and 8 hex digits of the serial's CRC-32C
// (two serials differing only in case or punctuation stay apart).
// Thread-safety: pure functions.
#ifndef PDC_MODEL_DRA_DEVICE_NAME_H_
#define PDC_MODEL_DRA_DEVICE_NAME_H_

#include <string>
#include <string_view>

namespace pdc::model {

// The DNS-label device name of `serial` ("" for an empty serial).
std::string DraDeviceNameFromSerial(std::string_view serial);

}  // namespace pdc::model

#endif  // PDC_MODEL_DRA_DEVICE_NAME_H_
