#include "extender/extender_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pdc::extender {

std::string_view RouteName(Route r) {
  switch (r) {
    case Route::kFilter: return "filter";
    case Route::kPrioritize: return "prioritize";
    case Route::kBind: return "bind";
    case Route::kPreempt: return "preempt";
    case Route::kInventory: return "inventory";
    case Route::kAllocations: return "allocations";
    case Route::kClaims: return "claims";
    case Route::kNodes: return "nodes";
    case Route::kDevices: return "devices";
    case Route::kHealth: return "health";
    case Route::kMetrics: return "metrics";
    case Route::kOther:
    case Route::kCount:
      break;
  }
  return "other";
}

ExtenderMetrics::ExtenderMetrics(MetricsRegistry* registry,
                                 const Allocator* allocator,
                                 const Clock* clock, std::string_view version) {
  requests_ = registry->AddCounterFamily(
      "pdc_http_requests_total", "HTTP requests served, by route and status.",
      {"verb", "code"});
  HistogramFamily* latency = registry->AddHistogramFamily(
      "pdc_http_request_duration_seconds",
      "Time from a complete request to its answer, by route.", {"verb"},
      DefaultLatencyBuckets());
  for (size_t i = 0; i < latency_.size(); ++i) {
    latency_[i] = latency->WithLabels(
        {std::string(RouteName(static_cast<Route>(i)))});
  }
  CounterFamily* filter = registry->AddCounterFamily(
      "pdc_filter_nodes_total",
      "Candidate nodes judged by filter, by the reason of the verdict.",
      {"reason"});
  for (size_t i = 0; i < filter_.size(); ++i) {
    const std::string_view label = ToString(static_cast<FilterReason>(i));
    if (label == "unknown") continue;  // Not a FilterReason value.
    filter_[i] = filter->WithLabels({std::string(label)});
  }
  CounterFamily* binds = registry->AddCounterFamily(
      "pdc_binds_total", "Bind requests answered, by result.", {"result"});
  binds_ok_ = binds->WithLabels({"ok"});
  binds_error_ = binds->WithLabels({"error"});
  binds_unknown_ = binds->WithLabels({"unknown"});
  rollbacks_ = registry->AddCounter(
      "pdc_bind_rollbacks_total",
      "Binds whose allocation was undone because the Kubernetes API failed.");
  CounterFamily* read_backs = registry->AddCounterFamily(
      "pdc_bind_read_backs_total",
      "Pods read back after a Binding whose outcome the Kubernetes API did not tell, by what "
      "they showed.",
      {"result"});
  read_back_bound_ = read_backs->WithLabels({"bound"});
  read_back_not_bound_ = read_backs->WithLabels({"not_bound"});
  read_back_unknown_ = read_backs->WithLabels({"unknown"});
  store_sync_ = registry->AddHistogram(
      "pdc_store_sync_duration_seconds",
      "Time to make a store record durable (fsync, group commit).",
      ExponentialBuckets(0.0001, 2, 16));
  long_polls_ = registry->AddGauge(
      "pdc_long_polls_waiting", "Allocation long-polls parked right now.");
  events_ = registry->AddCounterFamily(
      "pdc_events_total",
      "Kubernetes Events pdc-extender recorded, by what became of them.", {"result"});
  registry->AddCallbackFamily(
      "pdc_build_info", "Build of this pdc-extender.", MetricType::kGauge,
      {"version"}, [v = std::string(version)] {
        return std::vector<LabeledValue>{{{v}, 1}};
      });
  if (allocator == nullptr) return;
  registry->AddCallbackFamily(
      "pdc_claims", "Claims by phase.", MetricType::kGauge, {"phase"},
      [allocator] {
        AllocatorStats s = allocator->Stats();
        return std::vector<LabeledValue>{
            {{"Bound"}, static_cast<double>(s.claims_bound)},
            {{"Lost"}, static_cast<double>(s.claims_lost)},
            {{"Pending"}, static_cast<double>(s.claims_pending)}};
      });
  registry->AddCallbackFamily(
      "pdc_devices", "Managed devices by state.", MetricType::kGauge,
      {"state"}, [allocator] {
        AllocatorStats s = allocator->Stats();
        return std::vector<LabeledValue>{
            {{"allocated"}, static_cast<double>(s.devices_allocated)},
            {{"free"}, static_cast<double>(s.devices_free)},
            {{"released"}, static_cast<double>(s.devices_released)},
            {{"returning"}, static_cast<double>(s.devices_returning)},
            {{"unhealthy"}, static_cast<double>(s.devices_unhealthy)}};
      });
  registry->AddCallbackFamily(
      "pdc_nodes", "Nodes by whether their driver reports.",
      MetricType::kGauge, {"state"}, [allocator] {
        AllocatorStats s = allocator->Stats();
        return std::vector<LabeledValue>{
            {{"not_reporting"}, static_cast<double>(s.nodes_not_reporting)},
            {{"reporting"},
             static_cast<double>(s.nodes - s.nodes_not_reporting)}};
      });
  registry->AddCallbackGauge(
      "pdc_store_revision", "Revision of the allocator's durable state.",
      [allocator] { return static_cast<double>(allocator->revision()); });
  registry->AddCallbackFamily(
      "pdc_node_inventory_age_seconds",
      "Seconds since each node's driver last reported its inventory.",
      MetricType::kGauge, {"node"}, [allocator, clock] {
        std::vector<LabeledValue> out;
        const absl::Time now = clock->Now();
        for (const NodeView& n : allocator->ListNodes()) {
          if (n.last_report == absl::InfinitePast()) continue;
          out.push_back(
              {{n.name}, absl::ToDoubleSeconds(now - n.last_report)});
        }
        return out;
      });
}

Counter* ExtenderMetrics::RequestCounter(Route route, int code) {
  const size_t r = static_cast<size_t>(route);
  auto slow = [&] {
    return requests_->WithLabels(
        {std::string(RouteName(route)), absl::StrCat(code)});
  };
  if (r >= request_counters_.size()) return slow();
  for (size_t c = 0; c < kCachedCodes.size(); ++c) {
    if (kCachedCodes[c] != code) continue;
    std::atomic<Counter*>& slot = request_counters_[r][c];
    Counter* counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      // Racing threads get the same child from the family.
      counter = slow();
      slot.store(counter, std::memory_order_release);
    }
    return counter;
  }
  return slow();
}

void ExtenderMetrics::ObserveRequest(Route route, int code,
                                     absl::Duration latency) {
  const size_t i = static_cast<size_t>(route);
  RequestCounter(route, code)->Increment();
  if (i < latency_.size()) latency_[i]->ObserveDuration(latency);
}

void ExtenderMetrics::CountFilter(FilterReason reason, size_t nodes) {
  const size_t i = static_cast<size_t>(reason);
  if (i < filter_.size() && filter_[i] != nullptr && nodes > 0) {
    filter_[i]->Increment(static_cast<double>(nodes));
  }
}

void ExtenderMetrics::CountBind(bool ok) {
  (ok ? binds_ok_ : binds_error_)->Increment();
}

void ExtenderMetrics::CountBindUnknown() { binds_unknown_->Increment(); }

void ExtenderMetrics::CountRollback() { rollbacks_->Increment(); }

void ExtenderMetrics::CountReadBack(ReadBack result) {
  switch (result) {
    case ReadBack::kBound:
      read_back_bound_->Increment();
      return;
    case ReadBack::kNotBound:
      read_back_not_bound_->Increment();
      return;
    case ReadBack::kUnknown:
      read_back_unknown_->Increment();
      return;
  }
}

}  // namespace pdc::extender
