#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace pdc {
namespace {

[[noreturn]] void MetricsFatal(const std::string& message) {
  std::fprintf(stderr, "pdc metrics registration error: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AppendEscapedLabelValue(std::string* out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

// HELP text escapes only backslash and newline (quotes stay as they are).
void AppendEscapedHelp(std::string* out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void CheckBuckets(std::string_view name, const std::vector<double>& buckets) {
  if (buckets.empty()) {
    MetricsFatal(std::string(name) + ": histogram needs at least one bucket");
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i])) {
      MetricsFatal(
          std::string(name) +
          ": histogram bucket bounds must be finite (+Inf is implicit)");
    }
    if (i > 0 && !(buckets[i - 1] < buckets[i])) {
      MetricsFatal(std::string(name) +
                   ": histogram bucket bounds must be strictly increasing");
    }
  }
}

// Callback-computed samples of a counter or gauge family.
class CallbackFamily final : public metrics_internal::FamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names,
                 std::function<std::vector<LabeledValue>()> fn)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        fn_(std::move(fn)) {}

  bool is_callback() const override { return true; }

  bool AppendSamples(std::string* out) const override {
    std::vector<LabeledValue> samples = fn_();
    std::erase_if(samples, [&](const LabeledValue& s) {
      return s.label_values.size() != label_names().size();
    });
    std::stable_sort(samples.begin(), samples.end(),
                     [](const LabeledValue& a, const LabeledValue& b) {
                       return a.label_values < b.label_values;
                     });
    for (const LabeledValue& s : samples) {
      metrics_internal::AppendSample(out, name(), label_names(), s.label_values,
                                     "", "", s.value);
    }
    return !samples.empty();
  }

 private:
  const std::function<std::vector<LabeledValue>()> fn_;
};

}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "NaN";  // Cannot happen with 64 bytes.
  return std::string(buf, end);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(double v) {
  // First bound >= v: `le` is inclusive. NaN lands in +Inf.
  const size_t i =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v) -
      upper_bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(upper_bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> DefaultLatencyBuckets() {
  return {.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(start + width * i);
  return out;
}

namespace metrics_internal {

void FamilyBase::CheckLabelCount(const std::vector<std::string>& values) const {
  if (values.size() != label_names_.size()) {
    MetricsFatal(name_ + ": got " + std::to_string(values.size()) +
                 " label values for " + std::to_string(label_names_.size()) +
                 " label names");
  }
}

void AppendSample(std::string* out, std::string_view name,
                  const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values,
                  std::string_view extra_name, std::string_view extra_value,
                  double value) {
  out->append(name);
  if (!label_names.empty() || !extra_name.empty()) {
    out->push_back('{');
    bool first = true;
    auto pair = [&](std::string_view n, std::string_view v) {
      if (!first) out->push_back(',');
      first = false;
      out->append(n);
      out->append("=\"");
      AppendEscapedLabelValue(out, v);
      out->push_back('"');
    };
    for (size_t i = 0; i < label_names.size(); ++i) {
      pair(label_names[i], label_values[i]);
    }
    if (!extra_name.empty()) pair(extra_name, extra_value);
    out->push_back('}');
  }
  out->push_back(' ');
  out->append(FormatMetricValue(value));
  out->push_back('\n');
}

void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Counter& c) {
  AppendSample(out, name, label_names, label_values, "", "", c.Value());
}

void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Gauge& g) {
  AppendSample(out, name, label_names, label_values, "", "", g.Value());
}

void AppendChildSamples(std::string* out, const std::string& name,
                        const std::vector<std::string>& label_names,
                        const std::vector<std::string>& label_values,
                        const Histogram& h) {
  // Read the sum before the counts: a concurrent Observe may make them
  // disagree by one observation, never make _count smaller than a bucket.
  const double sum = h.Sum();
  const std::vector<uint64_t> counts = h.CumulativeCounts();
  const std::string bucket_name = name + "_bucket";
  const std::vector<double>& bounds = h.upper_bounds();
  for (size_t i = 0; i < bounds.size(); ++i) {
    AppendSample(out, bucket_name, label_names, label_values, "le",
                 FormatMetricValue(bounds[i]), static_cast<double>(counts[i]));
  }
  AppendSample(out, bucket_name, label_names, label_values, "le", "+Inf",
               static_cast<double>(counts.back()));
  AppendSample(out, name + "_sum", label_names, label_values, "", "", sum);
  AppendSample(out, name + "_count", label_names, label_values, "", "",
               static_cast<double>(counts.back()));
}

}  // namespace metrics_internal

metrics_internal::FamilyBase* MetricsRegistry::GetOrAdd(
    std::string_view name, std::string_view help, MetricType type,
    const std::vector<std::string>& label_names,
    const std::vector<double>& buckets, bool is_callback,
    const std::function<std::unique_ptr<metrics_internal::FamilyBase>()>&
        make) {
  if (!IsValidMetricName(name)) {
    MetricsFatal("invalid metric name \"" + std::string(name) +
                 "\" (want [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      MetricsFatal(std::string(name) + ": invalid label name \"" + label +
                   "\" (want [a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    }
    if (type == MetricType::kHistogram && label == "le") {
      MetricsFatal(std::string(name) + ": label \"le\" is reserved");
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        MetricsFatal(std::string(name) + ": duplicate label \"" + label + "\"");
      }
    }
  }
  if (type == MetricType::kHistogram) CheckBuckets(name, buckets);

  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    const metrics_internal::FamilyBase& f = *it->second;
    const std::vector<double>* b = f.buckets();
    const bool same = f.type() == type && f.help() == help &&
                      f.label_names() == label_names &&
                      f.is_callback() == is_callback && !is_callback &&
                      (b == nullptr ? buckets.empty() : *b == buckets);
    if (!same) {
      MetricsFatal("metric \"" + std::string(name) +
                   "\" registered twice with different definitions");
    }
    return it->second.get();
  }
  auto [inserted, ok] = families_.emplace(std::string(name), make());
  return inserted->second.get();
}

CounterFamily* MetricsRegistry::AddCounterFamily(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names) {
  return static_cast<CounterFamily*>(
      GetOrAdd(name, help, MetricType::kCounter, label_names, {}, false, [&] {
        return std::make_unique<CounterFamily>(
            std::string(name), std::string(help), MetricType::kCounter,
            label_names);
      }));
}

GaugeFamily* MetricsRegistry::AddGaugeFamily(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names) {
  return static_cast<GaugeFamily*>(
      GetOrAdd(name, help, MetricType::kGauge, label_names, {}, false, [&] {
        return std::make_unique<GaugeFamily>(std::string(name),
                                             std::string(help),
                                             MetricType::kGauge, label_names);
      }));
}

HistogramFamily* MetricsRegistry::AddHistogramFamily(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names, std::vector<double> buckets) {
  return static_cast<HistogramFamily*>(GetOrAdd(
      name, help, MetricType::kHistogram, label_names, buckets, false, [&] {
        return std::make_unique<HistogramFamily>(
            std::string(name), std::string(help), MetricType::kHistogram,
            label_names, buckets);
      }));
}

Counter* MetricsRegistry::AddCounter(std::string_view name,
                                     std::string_view help) {
  return AddCounterFamily(name, help, {})->WithLabels({});
}

Gauge* MetricsRegistry::AddGauge(std::string_view name, std::string_view help) {
  return AddGaugeFamily(name, help, {})->WithLabels({});
}

Histogram* MetricsRegistry::AddHistogram(std::string_view name,
                                         std::string_view help,
                                         std::vector<double> buckets) {
  return AddHistogramFamily(name, help, {}, std::move(buckets))->WithLabels({});
}

void MetricsRegistry::AddCallbackGauge(std::string_view name,
                                       std::string_view help,
                                       std::function<double()> fn) {
  AddCallbackFamily(name, help, MetricType::kGauge, {}, [fn = std::move(fn)] {
    return std::vector<LabeledValue>{{{}, fn()}};
  });
}

void MetricsRegistry::AddCallbackFamily(
    std::string_view name, std::string_view help, MetricType type,
    std::vector<std::string> label_names,
    std::function<std::vector<LabeledValue>()> fn) {
  if (type == MetricType::kHistogram) {
    MetricsFatal(std::string(name) +
                 ": callback families are counters or gauges");
  }
  // A second registration of a callback name is always an error: two
  // callbacks cannot both own the value.
  GetOrAdd(name, help, type, label_names, {}, true, [&] {
    return std::make_unique<CallbackFamily>(
        std::string(name), std::string(help), type, label_names, std::move(fn));
  });
}

std::string MetricsRegistry::Render() const {
  // Families are never removed, so the pointers stay valid after the lock
  // is dropped; callbacks then run without the registry lock.
  std::vector<const metrics_internal::FamilyBase*> families;
  {
    absl::MutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_)
      families.push_back(family.get());
  }
  std::string out;
  std::string samples;
  for (const metrics_internal::FamilyBase* f : families) {
    samples.clear();
    if (!f->AppendSamples(&samples)) continue;
    out.append("# HELP ");
    out.append(f->name());
    out.push_back(' ');
    AppendEscapedHelp(&out, f->help());
    out.append("\n# TYPE ");
    out.append(f->name());
    out.push_back(' ');
    out.append(TypeName(f->type()));
    out.push_back('\n');
    out.append(samples);
  }
  return out;
}

}  // namespace pdc
