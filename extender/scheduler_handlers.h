// The four kube-scheduler extender verbs (docs/design.md §5, wire format in
// docs/rest-api.md §2) on top of the allocator: filter, prioritize, bind,
// preempt. Each takes the request body (parsed in place, so it is consumed)
// and returns the complete HTTP answer, except bind with a BindQueue
// (ExtenderContext::binds): it starts the saga there and parks the request
// as a long-poll, and answers on the run the saga's end wakes.
// Bad JSON or wrong types are HTTP 400 with {"error","field"}; problems a
// user must fix on the pod (an invalid claim name in its annotation) are a
// 200 answer with Error set, because kube-scheduler shows that text in the
// pod's events and shows nothing useful for a non-200.
// Thread-safety: thread-safe; handlers run concurrently on server threads.
#ifndef PDC_EXTENDER_SCHEDULER_HANDLERS_H_
#define PDC_EXTENDER_SCHEDULER_HANDLERS_H_

#include <string>

#include "extender/bind_queue.h"
#include "extender/binder.h"
#include "extender/extender_context.h"
#include "net/http_types.h"

namespace pdc::extender {

// The server's values (net/http_types.h); pdc::HttpResponse is the client's.
using net::HttpResponse;

class SchedulerHandlers {
 public:
  explicit SchedulerHandlers(const ExtenderContext* ctx)
      : ctx_(ctx), binder_(ctx), binds_(ctx->binds != nullptr ? ctx->binds : &inline_binds_) {}

  HttpResponse Filter(std::string& body) const;
  HttpResponse Prioritize(std::string& body) const;
  HttpResponse Bind(net::HttpRequest& request) const;
  HttpResponse Preempt(std::string& body) const;

 private:
  // A parked bind's run: the saga's answer, or wait on.
  HttpResponse ResumeBind(const net::HttpRequest& request) const;

  const ExtenderContext* const ctx_;
  // The bind saga when the context brings no Binds of its own (standalone:
  // on the HTTP thread); Bind only decodes, starts and encodes.
  const Binder binder_;
  InlineBinds inline_binds_{&binder_};
  Binds* const binds_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_SCHEDULER_HANDLERS_H_
