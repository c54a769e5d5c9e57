// JSON codecs of the pdc REST API (docs/rest-api.md, the wire format shared
// by the extender, the node driver, pdcctl and the simulator).
// Writers produce the exact documented shapes with keys in a fixed order;
// readers validate every field and name it in errors (TypeError -> 400 for a
// wrong JSON type, FieldError -> 422 for a bad value).
// One codec per wire type: the server, its clients (pdc-node, pdcctl) and
// pdc-sim all decode with these, so they read what the server writes.
// The codecs are split by wire family:
//   api/device_json.h     the node driver's: devices, inventory, allocations
//   api/claim_json.h      claims, claim keys, a device's hand-over
//   api/node_view_json.h  the node and device lists people read
// The hand-off wire is api/handoff_json.h.
// Thread-safety: pure functions.
#ifndef PDC_API_REST_JSON_H_
#define PDC_API_REST_JSON_H_

#include "api/claim_json.h"        // IWYU pragma: export
#include "api/device_json.h"       // IWYU pragma: export
#include "api/node_view_json.h"    // IWYU pragma: export

#endif  // PDC_API_REST_JSON_H_
