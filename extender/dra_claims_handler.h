// GET /v1/dra/claims (docs/rest-api.md §3.7): the ResourceClaims the DRA claim
// keeper follows, as pdcctl get draclaims shows them. The keeper's watch
// cache is the source (a copy read under its lock); each allocated device is
// matched to pdc's inventory by node and name: pdc-node's pool of a node is
// named after the node and its devices after their serial
// (model/dra_device_name.h), so the device of pool P named N is the device
// of node P whose serial yields N. A claim is listed when a pdc driver (a
// deviceClasses[].draDriverName) or a device of pdc's inventory is in its
// allocation, or when it is kept, or to be kept, for a VirtualMachine.
// With the keeper off the answer is 200 with "keeper": false, no items and
// a note naming extender.dra.keeper.enabled.
// Thread-safety: thread-safe (pure but for the keeper's locked copy).
#ifndef PDC_EXTENDER_DRA_CLAIMS_HANDLER_H_
#define PDC_EXTENDER_DRA_CLAIMS_HANDLER_H_

#include <set>
#include <string>
#include <vector>

#include "api/dra_claims_json.h"
#include "extender/dra/claim_keeper.h"
#include "extender/extender_context.h"
#include "model/allocations.h"
#include "net/http_types.h"

namespace pdc::extender {

// The listing of `claims` (the keeper's view; `synced` its started()),
// matched to `nodes`; `pdc_drivers` are the DRA driver names pdc-node
// serves.
api::DraClaimList ViewDraClaims(std::vector<dra::ClaimKeeper::ClaimView> claims, bool synced,
                                const std::vector<NodeView>& nodes,
                                const std::set<std::string>& pdc_drivers);

// The answer of GET /v1/dra/claims from ctx.dra_keeper (null: off).
net::HttpResponse ListDraClaims(const ExtenderContext& ctx);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_DRA_CLAIMS_HANDLER_H_
