#include "extender/json_response.h"

#include <utility>

#include "common/strings.h"

namespace pdc::extender {

HttpResponse ErrorResponse(const absl::Status& s) {
  HttpResponse r;
  r.status = json::HttpStatusFor(s);
  r.body = json::ErrorBody(StdSv(s.message()), json::FieldOf(s));
  return r;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace pdc::extender
