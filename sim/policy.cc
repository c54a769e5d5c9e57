#include "sim/policy.h"

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace pdc::sim {

const std::vector<std::string>& AllPolicyNames() {
  static const auto* names =
      new std::vector<std::string>{"device-plugin", "dra", "pdc", "pdc-dra"};
  return *names;
}

absl::StatusOr<std::unique_ptr<Policy>> NewPolicy(std::string_view name,
                                                  const PolicyContext& ctx) {
  if (name == "device-plugin") return NewDevicePluginPolicy(ctx);
  if (name == "dra") return NewDraPolicy(ctx);
  if (name == "pdc") return NewPdcPolicy(ctx);
  if (name == "pdc-dra") return NewPdcDraPolicy(ctx);
  if (name == "pdc-http") return NewPdcHttpPolicy(ctx);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy \"", Sv(name), "\" (known: device-plugin, dra, pdc, pdc-dra, pdc-http)"));
}

}  // namespace pdc::sim
