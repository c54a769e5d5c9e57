#include "extender/dra_claims_handler.h"

#include <map>
#include <utility>

#include "extender/json_response.h"
#include "model/dra_device_name.h"

namespace pdc::extender {
namespace {

constexpr std::string_view kKeeperOffNote =
    "the DRA claim keeper is off on this pdc-extender (extender.dra.keeper.enabled is false): "
    "it follows no ResourceClaims";
constexpr std::string_view kNotSyncedNote =
    "the DRA claim keeper's watches (ResourceClaims, virt-launcher pods, VMs) have not listed "
    "yet: the list may be incomplete";

}  // namespace

api::DraClaimList ViewDraClaims(std::vector<dra::ClaimKeeper::ClaimView> claims, bool synced,
                                const std::vector<NodeView>& nodes,
                                const std::set<std::string>& pdc_drivers) {
  // (node, device name) -> device, for the devices with a serial.
  std::map<std::pair<std::string, std::string>, const Device*> by_name;
  for (const NodeView& n : nodes) {
    for (const Device& d : n.inventory.devices) {
      if (d.serial.empty()) continue;
      by_name.emplace(std::pair{n.name, model::DraDeviceNameFromSerial(d.serial)}, &d);
    }
  }
  api::DraClaimList out;
  out.keeper = true;
  out.synced = synced;
  if (!synced) out.note = std::string(kNotSyncedNote);
  for (dra::ClaimKeeper::ClaimView& c : claims) {
    api::DraClaimView v;
    v.ns = std::move(c.ns);
    v.name = std::move(c.name);
    v.uid = std::move(c.uid);
    v.allocated = c.claim.allocated;
    bool ours = false;
    for (dra::AllocatedDevice& a : c.claim.devices) {
      api::DraClaimDevice d;
      if (auto it = by_name.find({a.pool, a.device}); it != by_name.end()) {
        d.serial = it->second->serial;
        d.address = it->second->address;
        ours = true;
      }
      ours = ours || pdc_drivers.count(a.driver) > 0;
      d.request = std::move(a.request);
      d.driver = std::move(a.driver);
      d.pool = std::move(a.pool);
      d.device = std::move(a.device);
      v.devices.push_back(std::move(d));
    }
    for (const dra::Consumer& r : c.claim.reserved_for) {
      if (dra::IsPod(r)) v.pods.push_back({r.name, r.uid});
    }
    if (c.vm.has_value()) v.vm = api::DraConsumerRef{c.vm->name, c.vm->uid};
    v.persisted = c.persisted;
    if (!ours && !v.vm.has_value()) continue;
    out.items.push_back(std::move(v));
  }
  return out;
}

net::HttpResponse ListDraClaims(const ExtenderContext& ctx) {
  if (ctx.dra_keeper == nullptr) {
    api::DraClaimList off;
    off.note = std::string(kKeeperOffNote);
    return JsonResponse(200, api::WriteDraClaimList(off));
  }
  return JsonResponse(200, api::WriteDraClaimList(
                               ViewDraClaims(ctx.dra_keeper->Claims(), ctx.dra_keeper->started(),
                                             ctx.allocator->ListNodes(), ctx.dra_drivers)));
}

}  // namespace pdc::extender
