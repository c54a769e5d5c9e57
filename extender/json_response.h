// REST answers built from the api/ codecs: the error body of a non-OK
// status and a JSON body with its status code. The codecs themselves live in
// api/ (shared with pdc-node, pdcctl and pdc-sim); only what needs the HTTP
// types stays here.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_JSON_RESPONSE_H_
#define PDC_EXTENDER_JSON_RESPONSE_H_

#include <string>

#include "absl/status/status.h"
#include "api/json_util.h"
#include "net/http_types.h"

namespace pdc::extender {

namespace json = api::json;
using net::HttpResponse;  // The server's (net/http_types.h); pdc::HttpResponse is the client's.

// The REST error response for a non-OK status: {"error", "field"} with the
// status json::HttpStatusFor maps it to.
HttpResponse ErrorResponse(const absl::Status& s);
HttpResponse JsonResponse(int status, std::string body);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_JSON_RESPONSE_H_
