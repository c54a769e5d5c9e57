// pdcctl output: the REST API's values (decoded by api/, docs/rest-api.md)
// as kubectl-like aligned tables and describe text. Pure functions: values
// in, text out, `now` injected for ages. Rows are sorted (namespace/name,
// node name, node + PCI address) whatever order the server used.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_
#define PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/dra_claims_json.h"
#include "api/rest_json.h"
#include "model/allocations.h"
#include "model/types.h"

namespace pdc::pdcctl {

// Columns padded to their widest cell, 3 spaces apart, no trailing spaces,
// one '\n' per line (header first). Rows shorter than the header are padded.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// kubectl's short ages: 45s, 3m12s, 42m, 5h3m, 20h, 3d4h, 12d.
std::string HumanAge(absl::Duration d);

// The tables below are "" for an empty list (the caller says "No resources
// found").
//   [NAMESPACE] NAME PHASE RESOURCE NODE DEVICES VM
std::string ClaimsTable(std::vector<Claim> claims, bool show_namespace);
//   NAME REPORTING LAST REPORT DEVICES
std::string NodesTable(std::vector<api::NodeSummary> nodes, absl::Time now);
//   NODE ADDRESS ID CLASS IOMMU NUMA SERIAL DRIVER HEALTH CLAIM
// `node_filter` "" = all nodes.
std::string DevicesTable(std::vector<api::DeviceListing> devices, std::string_view node_filter);
//   NODE RESOURCE VM POD POD-UID DEVICES (pods waiting for their devices)
std::string HandoffsTable(std::vector<PendingHandoff> handoffs);
//   NAMESPACE NAME VM NODE DEVICE SERIAL PERSISTED (the DRA claims the
// keeper follows; a claim of several devices lists them comma-separated).
std::string DraClaimsTable(std::vector<api::DraClaimView> claims);
// kubectl-describe style "Key:  value" lines for one claim.
std::string DescribeClaim(const Claim& claim);
// Re-indents JSON for -o json.
absl::StatusOr<std::string> PrettyJson(std::string_view json);

}  // namespace pdc::pdcctl

#endif  // PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_
