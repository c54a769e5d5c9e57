#include "driver/node_extender_api.h"

#include <vector>

#include "common/status_macros.h"

namespace pdc::driver {

absl::Status ExtenderApi::ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                                         std::string_view resource_name,
                                         absl::Span<const PciAddress> devices) {
  return absl::UnimplementedError("this extender API does not confirm device hand-offs");
}

absl::StatusOr<uint64_t> HttpExtenderApi::PutInventory(const NodeInventory& inventory) {
  ASSIGN_OR_RETURN(api::InventoryAccepted accepted, client_.PutInventory(inventory));
  return accepted.version;
}

absl::StatusOr<NodeAllocations> HttpExtenderApi::GetAllocations(std::string_view node,
                                                                uint64_t since,
                                                                absl::Duration wait) {
  return client_.GetNodeAllocations(node, since, wait);
}

absl::Status HttpExtenderApi::ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                                             std::string_view resource_name,
                                             absl::Span<const PciAddress> devices) {
  const api::HandoffConfirm confirm{std::string(pod_uid), std::string(resource_name),
                                    std::vector<PciAddress>(devices.begin(), devices.end())};
  return client_.ConfirmHandoff(node, confirm).status();
}

}  // namespace pdc::driver
