// The REST API's and the hand-off's request and answer bodies; the first
// byte picks the decoder. Where a writer exists, what the decoder accepts
// must survive a write and a second read unchanged.
#include <string>

#include "api/handoff_json.h"
#include "api/rest_json.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace api = pdc::api;
  using pdc::fuzz::Broken;
  if (size == 0) return 0;
  const std::string_view body = pdc::fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 10) {
    case 0: {
      auto inv = api::ParseInventory(body, "node-a");
      if (inv.ok() && api::ParseInventory(api::WriteInventory(*inv), "node-a").value_or(
                          pdc::NodeInventory{}) != *inv) {
        Broken("inventory does not round-trip");
      }
      break;
    }
    case 1:
      (void)api::ParseNodeAllocations(body);
      break;
    case 2: {
      auto c = api::ParseClaimCreate(body, "vms");
      if (!c.ok()) break;
      auto again = api::ParseClaimCreate(api::WriteClaimCreate(*c), "vms");
      if (!again.ok() || again->key != c->key || again->spec != c->spec) {
        Broken("claim create does not round-trip");
      }
      break;
    }
    case 3: {
      auto c = api::ParseClaim(body);
      if (c.ok() && !api::ParseClaim(api::WriteClaim(*c)).ok()) Broken("claim does not re-read");
      break;
    }
    case 4:
      (void)api::ParseClaimList(body);
      break;
    case 5: {
      auto h = api::ParseHandoffConfirm(body);
      if (h.ok() && api::ParseHandoffConfirm(api::WriteHandoffConfirm(*h)).value_or(
                        api::HandoffConfirm{}) != *h) {
        Broken("hand-off confirmation does not round-trip");
      }
      break;
    }
    case 6:
      (void)api::ParseHandoffList(body);
      break;
    case 7:
      (void)api::ParseClaimKeys(body, "claims");
      break;
    case 8: {
      auto nodes = api::ParseNodeList(body);
      if (nodes.ok() && api::ParseNodeList(api::WriteNodeList(*nodes)).value_or(
                            std::vector<api::NodeSummary>{}) != *nodes) {
        Broken("node list does not round-trip");
      }
      auto detail = api::ParseNodeDetail(body);
      if (detail.ok() &&
          api::ParseNodeDetail(api::WriteNodeDetail(*detail)).value_or(api::NodeDetail{}) !=
              *detail) {
        Broken("node detail does not round-trip");
      }
      break;
    }
    default: {
      auto devices = api::ParseDeviceList(body);
      if (devices.ok() && api::ParseDeviceList(api::WriteDeviceList(*devices)).value_or(
                              std::vector<api::DeviceListing>{}) != *devices) {
        Broken("device list does not round-trip");
      }
      break;
    }
  }
  return 0;
}
