// StoreCalls: how KubeApiStore and its parts (claim_objects.h,
// node_holds_objects.h, claim_reclaims.h) call kube-apiserver: one request,
// retried with backoff while the apiserver does not answer (transport
// errors, 429, 5xx) until a deadline, and, with several replicas, fenced:
// no write leaves a replica that may no longer write (Options::may_write),
// the repeat of a write included. Every other answer (2xx, 4xx) is the
// caller's to read.
// Thread-safety: thread-safe (the options are fixed at construction).
#ifndef PDC_EXTENDER_KUBE_STORE_CALLS_H_
#define PDC_EXTENDER_KUBE_STORE_CALLS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/kube_http_client.h"

namespace pdc::extender {

inline constexpr std::string_view kStoreMergePatch = "application/merge-patch+json";
inline constexpr std::string_view kStoreJson = "application/json";

class StoreCalls {
 public:
  struct Options {
    absl::Duration call_timeout = absl::Seconds(10);
    // How long a write (or a read it needs) is retried.
    absl::Duration write_deadline = absl::Seconds(30);
    int64_t list_page = 500;
    const Clock* clock = RealClock();
    // Whether this replica may still write; empty: always.
    std::function<bool()> may_write;
  };

  // `api` must outlive this.
  StoreCalls(kube::KubeApi* api, Options options) : api_(api), options_(std::move(options)) {}

  // One call, retried on Unavailable/DeadlineExceeded (no answer, 429, 5xx)
  // until `deadline`. A write from a replica that may not write any more is
  // FailedPrecondition and never sent.
  absl::StatusOr<pdc::HttpResponse> Call(std::string_view method, const std::string& path,
                                         const std::string& body, std::string_view content_type,
                                         std::string_view what, absl::Time deadline) const;

  // The deadline of a write that starts now.
  absl::Time WriteDeadline() const { return options_.clock->Now() + options_.write_deadline; }
  const Clock* clock() const { return options_.clock; }
  const Options& options() const { return options_; }

 private:
  kube::KubeApi* const api_;
  const Options options_;
};

// The DeleteOptions body of a DELETE with preconditions on the object's
// `uid` (and `resource_version`, when not empty).
std::string DeleteWithPreconditions(std::string_view uid, std::string_view resource_version = {});

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_KUBE_STORE_CALLS_H_
