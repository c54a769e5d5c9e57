// The four kube-scheduler extender verbs (docs/design.md §5, wire format in
// docs/rest-api.md §2) on top of the allocator: filter, prioritize, bind,
// preempt. Each takes the request body (parsed in place, so it is consumed)
// and returns the complete HTTP answer.
// Bad JSON or wrong types are HTTP 400 with {"error","field"}; problems a
// user must fix on the pod (an invalid claim name in its annotation) are a
// 200 answer with Error set, because kube-scheduler shows that text in the
// pod's events and shows nothing useful for a non-200.
// Thread-safety: thread-safe; handlers run concurrently on server threads.
#ifndef PDC_EXTENDER_SCHEDULER_HANDLERS_H_
#define PDC_EXTENDER_SCHEDULER_HANDLERS_H_

#include <string>

#include "extender/extender_context.h"
#include "net/http_types.h"

namespace pdc::extender {

// The server's values (net/http_types.h); pdc::HttpResponse is the client's.
using net::HttpResponse;

class SchedulerHandlers {
 public:
  explicit SchedulerHandlers(const ExtenderContext* ctx) : ctx_(ctx) {}

  HttpResponse Filter(std::string& body) const;
  HttpResponse Prioritize(std::string& body) const;
  HttpResponse Bind(std::string& body) const;
  HttpResponse Preempt(std::string& body) const;

 private:
  // The pod's request for a bind: from the filter-time cache, else from the
  // Kubernetes API. Error text says why neither worked.
  absl::StatusOr<api::PodRequest> PodForBind(const api::BindingArgs& args) const;

  const ExtenderContext* const ctx_;
};

// The value of the pdc.kubevirt.io/devices annotation for a bind:
// {"<resource name>": ["<PCI address>", ...], ...}, sorted.
std::string DevicesAnnotation(const BindOutcome& outcome);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_SCHEDULER_HANDLERS_H_
