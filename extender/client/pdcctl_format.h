// pdcctl output: REST API JSON (docs/rest-api.md) turned into
// kubectl-like aligned tables and describe text. Pure functions: JSON in,
// text out, `now` injected for ages. Rows are sorted (namespace/name, node
// name, node + PCI address) whatever order the server used.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_
#define PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdc::pdcctl {

// Columns padded to their widest cell, 3 spaces apart, no trailing spaces,
// one '\n' per line (header first). Rows shorter than the header are padded.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// kubectl's short ages: 45s, 3m12s, 42m, 5h3m, 20h, 3d4h, 12d.
std::string HumanAge(absl::Duration d);

// The bodies below are {"items": [...]} lists or one object; "" when the
// list is empty (the caller says "No resources found"). InvalidArgument if
// the body is not the expected JSON.
//   NAMESPACE NAME PHASE RESOURCE NODE DEVICES VM [AGE]
// (NAMESPACE only with show_namespace; AGE only when the server sends
// "creationTimestamp").
absl::StatusOr<std::string> ClaimsTable(std::string_view json,
                                        bool show_namespace, absl::Time now);
//   NAME REPORTING LAST REPORT DEVICES
absl::StatusOr<std::string> NodesTable(std::string_view json, absl::Time now);
//   NODE ADDRESS ID CLASS IOMMU NUMA SERIAL DRIVER HEALTH CLAIM
// `node_filter` "" = all nodes.
absl::StatusOr<std::string> DevicesTable(std::string_view json,
                                         std::string_view node_filter);
//   NODE RESOURCE VM POD POD-UID DEVICES (pods waiting for their devices)
absl::StatusOr<std::string> HandoffsTable(std::string_view json);
// kubectl-describe style "Key:  value" lines for one claim.
absl::StatusOr<std::string> DescribeClaim(std::string_view json,
                                          absl::Time now);
// Re-indents JSON for -o json.
absl::StatusOr<std::string> PrettyJson(std::string_view json);

// What to print for a non-2xx answer: the server's
// {"error": "...", "field": "..."} as "<message> (field <field>)", else
// "HTTP <status>: <first line of the body>".
std::string ServerErrorMessage(int status, std::string_view body);

}  // namespace pdc::pdcctl

#endif  // PDC_EXTENDER_CLIENT_PDCCTL_FORMAT_H_
