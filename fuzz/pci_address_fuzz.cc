// PciAddress::Parse: any text either fails or round-trips through ToString.
#include "fuzz/fuzz_util.h"
#include "model/pci_address.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = pdc::PciAddress::Parse(pdc::fuzz::AsText(data, size));
  if (!a.ok()) return 0;
  auto again = pdc::PciAddress::Parse(a->ToString());
  if (!again.ok() || *again != *a) pdc::fuzz::Broken("Parse(ToString(a)) != a");
  return 0;
}
