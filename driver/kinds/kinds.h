// The device kinds pdc-node knows, one file each; device_kind.cc's table
// chooses among them by PCI class.
// Thread-safety: each returns a stateless singleton.
#ifndef PDC_DRIVER_KINDS_KINDS_H_
#define PDC_DRIVER_KINDS_KINDS_H_

#include <cstdint>
#include <string>

#include "driver/device_kind.h"

namespace pdc::driver {

// NVMe controllers (class 0108xx): identity by serial (or namespace NGUID /
// EUI-64), block-device host use, erased (nvme_erase.h) on reclaim.
const DeviceKind& NvmeKind();
// Other mass storage (AHCI, SAS, RAID): block-device host use, no scrub.
const DeviceKind& BlockStorageKind();
// Network controllers: host use by their interfaces, no scrub.
const DeviceKind& NetworkKind();
// Any other PCI function (GPU, FPGA, ...): host use by the device class's
// hostDrivers, no scrub, identity by PCIe Device Serial Number where present.
const DeviceKind& GenericPciKind();

// "dsn:<16 hex digits>.<function>" from the PCIe Device Serial Number
// extended capability in the function's config space (`<dir>/config`), or
// "" when the config space has none (or cannot be read past the first 256
// bytes, as without CAP_SYS_ADMIN). The functions of one multi-function
// device share the number: `function` tells them apart.
std::string ReadDeviceSerialNumber(Sysfs& sys, const std::string& dir, uint8_t function);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_KINDS_KINDS_H_
