// A small Prometheus metrics registry and its text exposition format 0.0.4
// (prometheus-cpp is not packaged for Debian 12). Components declare their
// metrics once at start-up, keep the returned pointers, and update them on
// the hot path with one atomic operation; /metrics calls Render().
//
//   MetricsRegistry registry;
//   CounterFamily* requests = registry.AddCounterFamily(
//       "pdc_http_requests_total", "HTTP requests served.", {"verb", "code"});
//   Counter* filter_ok = requests->WithLabels({"filter", "200"});  // cache it
//   filter_ok->Increment();
//   std::string text = registry.Render();
//
// Registration errors are programming errors and abort the process with a
// message on stderr (invalid metric or label name, a name registered twice
// with a different type, help or labels, unsorted histogram buckets, a wrong
// number of label values). Registering the same definition twice returns the
// existing metric, so two components may declare a shared metric.
//
// Output is deterministic: families sorted by name, children sorted by their
// label values, histogram buckets in ascending order, families without any
// sample left out (as client_golang does).
//
// Thread-safety: everything here is thread-safe. Metrics and families live as
// long as their registry; pointers handed out never move. Callbacks run on
// the thread that calls Render(), without any registry lock held, so they may
// take their own locks (but must not register metrics).
#ifndef PDC_COMMON_METRICS_H_
#define PDC_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace pdc {

// Content-Type of Render()'s output.
inline constexpr std::string_view kMetricsContentType =
    "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };

// A monotonically increasing value (requests, errors, bytes).
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // REQUIRES: v >= 0 (a counter never decreases; negative values are ignored).
  void Increment(double v = 1.0) {
    if (v > 0) value_.fetch_add(v, std::memory_order_relaxed);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (queue length, free devices).
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  void Increment() { Add(1); }
  void Decrement() { Add(-1); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into buckets with upper bounds `le` (inclusive); the
// +Inf bucket is implicit.
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly increasing and finite (checked by the
  // registry; a Histogram built directly is not checked).
  explicit Histogram(std::vector<double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double v);
  // Observes the duration in seconds, the Prometheus base unit.
  void ObserveDuration(absl::Duration d) { Observe(absl::ToDoubleSeconds(d)); }

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Cumulative counts, one per upper bound plus the final +Inf bucket.
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t Count() const { return CumulativeCounts().back(); }
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> upper_bounds_;
  // Per-bucket (not cumulative) counts; the last one is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// Bucket helpers. Seconds, the Prometheus unit for durations.
// {.0005,.001,.0025,.005,.01,.025,.05,.1,.25,.5,1,2.5,5,10}
std::vector<double> DefaultLatencyBuckets();
// start, start*factor, ... (count values). REQUIRES: start > 0, factor > 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// start, start+width, ... (count values). REQUIRES: width > 0.
std::vector<double> LinearBuckets(double start, double width, int count);

// Formats a sample value the way Prometheus clients do: shortest round-trip
// decimal ("42", "0.005", "1e+06"), "+Inf", "-Inf", "NaN".
std::string FormatMetricValue(double v);

namespace metrics_internal {

// Shared, type-independent part of a family. Not for direct use.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names)
      : name_(std::move(name)),
        help_(std::move(help)),
        type_(type),
        label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Histogram bounds; empty for other types.
  virtual const std::vector<double>* buckets() const { return nullptr; }
  virtual bool is_callback() const { return false; }

  // Appends the sample lines (no HELP/TYPE). Returns false if it had none.
  virtual bool AppendSamples(std::string* out) const = 0;

 protected:
  // Aborts unless values.size() == label_names().size().
  void CheckLabelCount(const std::vector<std::string>& values) const;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// Appends `name{l1="v1",...,extra_name="extra_value"} value\n`.
void AppendSample(std::string* out, std::string_view name,
                  const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values,
                  std::string_view extra_name, std::string_view extra_value,
                  double value);
void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Counter& c);
void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Gauge& g);
void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Histogram& h);

}  // namespace metrics_internal

// All children of one metric name, one per distinct set of label values.
template <typename T>
class MetricFamily final : public metrics_internal::FamilyBase {
 public:
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names,
               std::vector<double> buckets = {})
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        buckets_(std::move(buckets)) {}

  // Gets or creates the child for these label values (same order as the
  // family's label names). The pointer stays valid as long as the registry;
  // callers on a hot path look it up once and keep it.
  T* WithLabels(const std::vector<std::string>& label_values) {
    CheckLabelCount(label_values);
    absl::MutexLock lock(&mu_);
    std::unique_ptr<T>& child = children_[label_values];
    if (child == nullptr) child = MakeChild();
    return child.get();
  }

  const std::vector<double>* buckets() const override {
    return this->type() == MetricType::kHistogram ? &buckets_ : nullptr;
  }

  bool AppendSamples(std::string* out) const override {
    absl::MutexLock lock(&mu_);
    for (const auto& [values, child] : children_) {
      metrics_internal::AppendChildSamples(out, name(), label_names(), values,
                                           *child);
    }
    return !children_.empty();
  }

 private:
  std::unique_ptr<T> MakeChild() const {
    if constexpr (std::is_same_v<T, Histogram>) {
      return std::make_unique<Histogram>(buckets_);
    } else {
      return std::make_unique<T>();
    }
  }

  const std::vector<double> buckets_;
  mutable absl::Mutex mu_;
  // std::map: sorted output, and children never move once created.
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_
      ABSL_GUARDED_BY(mu_);
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

// One sample of a callback family.
struct LabeledValue {
  std::vector<std::string> label_values;
  double value = 0;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Metrics without labels.
  Counter* AddCounter(std::string_view name, std::string_view help);
  Gauge* AddGauge(std::string_view name, std::string_view help);
  // REQUIRES: buckets strictly increasing, finite, non-empty.
  Histogram* AddHistogram(std::string_view name, std::string_view help,
                          std::vector<double> buckets);

  // Families with fixed label names; children by WithLabels().
  CounterFamily* AddCounterFamily(std::string_view name, std::string_view help,
                                  std::vector<std::string> label_names);
  GaugeFamily* AddGaugeFamily(std::string_view name, std::string_view help,
                              std::vector<std::string> label_names);
  HistogramFamily* AddHistogramFamily(std::string_view name,
                                      std::string_view help,
                                      std::vector<std::string> label_names,
                                      std::vector<double> buckets);

  // Values computed at scrape time (e.g. from allocator stats). `fn` runs on
  // the Render() thread and must outlive the registry's use.
  void AddCallbackGauge(std::string_view name, std::string_view help,
                        std::function<double()> fn);
  // `type` is kCounter or kGauge. Every returned LabeledValue must have one
  // value per label name (others are dropped); output is sorted by labels.
  void AddCallbackFamily(std::string_view name, std::string_view help,
                         MetricType type, std::vector<std::string> label_names,
                         std::function<std::vector<LabeledValue>()> fn);

  // The text exposition format 0.0.4; serve with kMetricsContentType.
  std::string Render() const;

 private:
  // Returns the family registered under `name`, creating it with `make` if
  // there is none; aborts if an existing one differs in definition.
  metrics_internal::FamilyBase* GetOrAdd(
      std::string_view name, std::string_view help, MetricType type,
      const std::vector<std::string>& label_names,
      const std::vector<double>& buckets, bool is_callback,
      const std::function<std::unique_ptr<metrics_internal::FamilyBase>()>&
          make);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<metrics_internal::FamilyBase>,
           std::less<>>
      families_ ABSL_GUARDED_BY(mu_);
};

// Validation used by the registry, exposed for tests and for callers that
// build names at run time.
bool IsValidMetricName(std::string_view name);  // [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidLabelName(
    std::string_view name);  // [a-zA-Z_][a-zA-Z0-9_]*, no "__"

// Measures elapsed time on an injected clock (fake in tests).
class Stopwatch {
 public:
  // REQUIRES: clock outlives the Stopwatch.
  explicit Stopwatch(const Clock* clock)
      : clock_(clock), start_(clock->Now()) {}
  absl::Duration Elapsed() const { return clock_->Now() - start_; }
  void Reset() { start_ = clock_->Now(); }

 private:
  const Clock* clock_;
  absl::Time start_;
};

// Observes the lifetime of the scope, in seconds, into a histogram.
class ScopedHistogramTimer {
 public:
  // REQUIRES: histogram and clock outlive the timer. histogram may be null.
  ScopedHistogramTimer(Histogram* histogram, const Clock* clock)
      : histogram_(histogram), stopwatch_(clock) {}
  ~ScopedHistogramTimer() {
    if (histogram_ != nullptr)
      histogram_->ObserveDuration(stopwatch_.Elapsed());
  }
  ScopedHistogramTimer(const ScopedHistogramTimer&) = delete;
  ScopedHistogramTimer& operator=(const ScopedHistogramTimer&) = delete;

 private:
  Histogram* histogram_;
  Stopwatch stopwatch_;
};

}  // namespace pdc

#endif  // PDC_COMMON_METRICS_H_
