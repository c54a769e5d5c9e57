#include "extender/kube_store_calls.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/backoff.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace {

bool RetryableCall(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

absl::StatusOr<pdc::HttpResponse> StoreCalls::Call(std::string_view method, const std::string& path,
                                                   const std::string& body,
                                                   std::string_view content_type,
                                                   std::string_view what,
                                                   absl::Time deadline) const {
  const absl::Duration initial = absl::Milliseconds(100);
  absl::Duration backoff = initial;
  for (;;) {
    const absl::Duration left = deadline - options_.clock->Now();
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat(Sv(what),
                                                 ": the apiserver did not take the write within ",
                                                 absl::FormatDuration(options_.write_deadline)));
    }
    if (method != "GET" && options_.may_write && !options_.may_write()) {
      return absl::FailedPreconditionError(
          absl::StrCat(Sv(what), ": not written, this replica is no longer the leader"));
    }
    absl::StatusOr<pdc::HttpResponse> r =
        api_->Call(method, path, body, content_type, what, std::min(left, options_.call_timeout));
    absl::Status s;
    if (r.ok()) {
      if (r->status != 429 && r->status < 500) return r;
      s = kube::FromApiserver(r->status, r->body, what);
    } else {
      s = r.status();
    }
    if (!RetryableCall(s)) return s;
    spdlog::warn("{} failed, retrying in {}: {}", what, absl::FormatDuration(backoff),
                 StdSv(s.message()));
    options_.clock->SleepFor(std::min(backoff, left));
    backoff = NextBackoff(backoff, initial, absl::Seconds(5));
  }
}

std::string DeleteWithPreconditions(std::string_view uid, std::string_view resource_version) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":)", api::json::Quote(uid),
      resource_version.empty()
          ? std::string()
          : absl::StrCat(R"(,"resourceVersion":)", api::json::Quote(resource_version)),
      "}}");
}

}  // namespace pdc::extender
