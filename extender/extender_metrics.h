// Every metric pdc-extender exports, declared in one place (names are the
// contract with deploy/'s dashboards and alerts; tests assert them by full
// name). Labels are bounded: verbs and routes are a fixed set, codes are HTTP
// status codes, node names are bounded by the cluster; never pod names.
//
//   pdc_http_requests_total{verb,code}          counter
//   pdc_http_request_duration_seconds{verb}     histogram
//   pdc_filter_nodes_total{reason}              counter (FilterReason labels)
//   pdc_binds_total{result}                     counter (ok|error|unknown)
//   pdc_bind_rollbacks_total                    counter
//   pdc_bind_read_backs_total{result}           counter (bound|not_bound|unknown)
//   pdc_claims{phase}                           gauge   (Allocator::Stats)
//   pdc_devices{state}                          gauge   (free|allocated|unhealthy|
//                                                         released|returning)
//   pdc_nodes{state}                            gauge   (reporting|not_reporting)
//   pdc_store_revision                          gauge
//   pdc_store_sync_duration_seconds             histogram (TimedStore)
//   pdc_node_inventory_age_seconds{node}        gauge
//   pdc_long_polls_waiting                      gauge
//   pdc_events_total{result}                    counter (EventResult labels,
//                                                         event_recorder.h)
//   pdc_build_info{version}                     gauge = 1
// The admission webhook declares its own (extender/admission_webhook.cc):
//   pdc_webhook_decisions_total{outcome}         counter (WebhookOutcome)
//   pdc_webhook_request_duration_seconds         histogram
// Thread-safety: all methods are thread-safe.
#ifndef PDC_EXTENDER_EXTENDER_METRICS_H_
#define PDC_EXTENDER_EXTENDER_METRICS_H_

#include <array>
#include <atomic>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "common/clock.h"
#include "common/metrics.h"

namespace pdc::extender {

// Request routes, the `verb` label.
enum class Route : uint8_t {
  kFilter = 0,
  kPrioritize,
  kBind,
  kPreempt,
  kInventory,
  kAllocations,
  kClaims,
  kNodes,
  kDevices,
  kHealth,
  kMetrics,
  kOther,
  kCount,
};
std::string_view RouteName(Route r);

// What reading a pod back after a Binding with an unknown outcome showed:
// bound to the node, not bound there (gone, re-created, bound elsewhere), or
// still nothing (not bound yet, or unreadable).
enum class ReadBack : uint8_t { kBound, kNotBound, kUnknown };

class ExtenderMetrics {
 public:
  // Registers every metric in `registry`. `allocator` (may be null in tests)
  // and `clock` are read at scrape time and must outlive the registry's use.
  ExtenderMetrics(MetricsRegistry* registry, const Allocator* allocator,
                  const Clock* clock, std::string_view version);

  // One request: its counter (cached per route and common code, so the hot
  // path takes no lock and builds no label strings) and its latency.
  void ObserveRequest(Route route, int code, absl::Duration latency);
  // `nodes` filter verdicts with `reason` (callers add up a request first).
  void CountFilter(FilterReason reason, size_t nodes);
  void CountBind(bool ok);
  // A bind answered with an error whose Binding may have been committed
  // (its allocation is kept).
  void CountBindUnknown();
  void CountRollback();
  // A pod read back after a Binding with an unknown outcome, by what it
  // showed.
  void CountReadBack(ReadBack result);
  Histogram* store_sync_seconds() { return store_sync_; }
  Gauge* long_polls_waiting() { return long_polls_; }
  // pdc_events_total{result}, for EventRecorderOptions::metrics.
  CounterFamily* events() { return events_; }

 private:
  // HTTP codes whose counters are cached; others go through WithLabels.
  static constexpr std::array<int, 10> kCachedCodes = {200, 400, 401, 404, 405,
                                                       409, 413, 422, 500, 503};
  Counter* RequestCounter(Route route, int code);

  CounterFamily* requests_;
  // Created on first use, so /metrics lists only series that happened.
  std::array<std::array<std::atomic<Counter*>, kCachedCodes.size()>,
             static_cast<size_t>(Route::kCount)>
      request_counters_{};
  std::array<Histogram*, static_cast<size_t>(Route::kCount)> latency_;
  std::array<Counter*, 16> filter_{};  // By FilterReason value.
  Counter* binds_ok_;
  Counter* binds_error_;
  Counter* binds_unknown_;
  Counter* rollbacks_;
  Counter* read_back_bound_;
  Counter* read_back_not_bound_;
  Counter* read_back_unknown_;
  Histogram* store_sync_;
  Gauge* long_polls_;
  CounterFamily* events_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_EXTENDER_METRICS_H_
