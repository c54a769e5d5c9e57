#include "common/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace pdc {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, GoldenTextIsSortedAndComplete) {
  MetricsRegistry r;
  // Registered out of order on purpose: output is sorted by family name.
  GaugeFamily* free = r.AddGaugeFamily("pdc_free_devices",
                                       "Free devices per class.", {"resource"});
  Counter* binds = r.AddCounter("pdc_binds_total", "Bind calls.");
  CounterFamily* requests = r.AddCounterFamily(
      "pdc_http_requests_total", "HTTP requests.", {"verb", "code"});
  Histogram* latency =
      r.AddHistogram("pdc_bind_seconds", "Bind latency.", {0.001, 0.01, 0.1});

  binds->Increment();
  binds->Increment(2);
  requests->WithLabels({"filter", "200"})->Increment(5);
  requests->WithLabels({"bind", "500"})->Increment();
  requests->WithLabels({"bind", "200"})->Increment(3);
  free->WithLabels({"devices.kubevirt.io/nvme"})->Set(7);
  free->WithLabels({"devices.kubevirt.io/fpga"})->Set(0.5);
  latency->Observe(0.0005);
  latency->Observe(0.01);  // `le` is inclusive.
  latency->Observe(0.05);
  latency->Observe(3);

  const std::string want =
      "# HELP pdc_bind_seconds Bind latency.\n"
      "# TYPE pdc_bind_seconds histogram\n"
      "pdc_bind_seconds_bucket{le=\"0.001\"} 1\n"
      "pdc_bind_seconds_bucket{le=\"0.01\"} 2\n"
      "pdc_bind_seconds_bucket{le=\"0.1\"} 3\n"
      "pdc_bind_seconds_bucket{le=\"+Inf\"} 4\n"
      "pdc_bind_seconds_sum 3.0605\n"
      "pdc_bind_seconds_count 4\n"
      "# HELP pdc_binds_total Bind calls.\n"
      "# TYPE pdc_binds_total counter\n"
      "pdc_binds_total 3\n"
      "# HELP pdc_free_devices Free devices per class.\n"
      "# TYPE pdc_free_devices gauge\n"
      "pdc_free_devices{resource=\"devices.kubevirt.io/fpga\"} 0.5\n"
      "pdc_free_devices{resource=\"devices.kubevirt.io/nvme\"} 7\n"
      "# HELP pdc_http_requests_total HTTP requests.\n"
      "# TYPE pdc_http_requests_total counter\n"
      "pdc_http_requests_total{verb=\"bind\",code=\"200\"} 3\n"
      "pdc_http_requests_total{verb=\"bind\",code=\"500\"} 1\n"
      "pdc_http_requests_total{verb=\"filter\",code=\"200\"} 5\n";
  EXPECT_EQ(r.Render(), want);
}

TEST(MetricsTest, LabeledHistogramGolden) {
  MetricsRegistry r;
  HistogramFamily* h =
      r.AddHistogramFamily("pdc_verb_seconds", "Per verb.", {"verb"}, {1, 2});
  h->WithLabels({"filter"})->Observe(1.5);
  EXPECT_EQ(r.Render(),
            "# HELP pdc_verb_seconds Per verb.\n"
            "# TYPE pdc_verb_seconds histogram\n"
            "pdc_verb_seconds_bucket{verb=\"filter\",le=\"1\"} 0\n"
            "pdc_verb_seconds_bucket{verb=\"filter\",le=\"2\"} 1\n"
            "pdc_verb_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 1\n"
            "pdc_verb_seconds_sum{verb=\"filter\"} 1.5\n"
            "pdc_verb_seconds_count{verb=\"filter\"} 1\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry r;
  r.AddGaugeFamily("pdc_g", "Help with \\ backslash,\nnewline and \"quotes\".",
                   {"v"})
      ->WithLabels({"a\\b\"c\nd"})
      ->Set(1);
  EXPECT_EQ(r.Render(),
            "# HELP pdc_g Help with \\\\ backslash,\\nnewline and "
            "\"quotes\".\n"
            "# TYPE pdc_g gauge\n"
            "pdc_g{v=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(MetricsTest, CallbackGaugesAreComputedAtScrapeTimeAndSorted) {
  MetricsRegistry r;
  double free_devices = 3;
  r.AddCallbackGauge("pdc_free", "Free.", [&] { return free_devices; });
  r.AddCallbackFamily(
      "pdc_claims", "Claims by phase.", MetricType::kGauge, {"phase"}, [] {
        return std::vector<LabeledValue>{
            {{"Pending"}, 2}, {{"Bound"}, 10}, {{"bad", "x"}, 1}};
      });
  free_devices = 4;
  EXPECT_EQ(r.Render(),
            "# HELP pdc_claims Claims by phase.\n"
            "# TYPE pdc_claims gauge\n"
            "pdc_claims{phase=\"Bound\"} 10\n"
            "pdc_claims{phase=\"Pending\"} 2\n"
            "# HELP pdc_free Free.\n"
            "# TYPE pdc_free gauge\n"
            "pdc_free 4\n");
}

TEST(MetricsTest, EmptyFamiliesAreLeftOut) {
  MetricsRegistry r;
  r.AddCounterFamily("pdc_unused_total", "Nothing yet.", {"x"});
  EXPECT_EQ(r.Render(), "");
}

TEST(MetricsTest, SameDefinitionTwiceReturnsSameMetric) {
  MetricsRegistry r;
  Counter* a = r.AddCounter("pdc_x_total", "X.");
  Counter* b = r.AddCounter("pdc_x_total", "X.");
  EXPECT_EQ(a, b);
  CounterFamily* f = r.AddCounterFamily("pdc_y_total", "Y.", {"l"});
  EXPECT_EQ(f->WithLabels({"1"}), f->WithLabels({"1"}));
  EXPECT_NE(f->WithLabels({"1"}), f->WithLabels({"2"}));
}

TEST(MetricsTest, FormatsValuesLikePrometheusClients) {
  struct Case {
    double v;
    std::string want;
  };
  const Case cases[] = {
      {0, "0"},
      {42, "42"},
      {-1.5, "-1.5"},
      {0.005, "0.005"},
      {1e6, "1e+06"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::nan(""), "NaN"},
  };
  for (const Case& c : cases) EXPECT_EQ(FormatMetricValue(c.v), c.want) << c.v;
}

TEST(MetricsTest, NameValidation) {
  struct Case {
    std::string name;
    bool metric_ok;
    bool label_ok;
  };
  const Case cases[] = {
      {"pdc_binds_total", true, true},
      {"_x", true, true},
      {"a:b", true, false},
      {"9abc", false, false},
      {"", false, false},
      {"a-b", false, false},
      {"__reserved", true, false},
      {"ab9", true, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(IsValidMetricName(c.name), c.metric_ok) << c.name;
    EXPECT_EQ(IsValidLabelName(c.name), c.label_ok) << c.name;
  }
}

using MetricsDeathTest = ::testing::Test;

TEST_F(MetricsDeathTest, RegistrationErrorsAbortWithAMessage) {
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddCounter("pdc-bad", "x");
      },
      "invalid metric name \"pdc-bad\"");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddCounter("pdc_a", "x");
        r.AddGauge("pdc_a", "x");
      },
      "registered twice");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddHistogram("pdc_h", "x", {1, 1});
      },
      "strictly increasing");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddCounterFamily("pdc_f", "x", {"a", "b"})->WithLabels({"1"});
      },
      "1 label values for 2 label names");
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.AddHistogramFamily("pdc_h", "x", {"le"}, {1});
      },
      "reserved");
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry r;
  CounterFamily* f = r.AddCounterFamily("pdc_c_total", "C.", {"t"});
  Histogram* h = r.AddHistogram("pdc_h", "H.", {1});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      Counter* c = f->WithLabels({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        c->Increment();
        h->Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f->WithLabels({"shared"})->Value(), kThreads * kPerThread);
  EXPECT_EQ(h->Count(), uint64_t{kThreads * kPerThread});
  EXPECT_THAT(r.Render(), HasSubstr("pdc_c_total{t=\"shared\"} 40000\n"));
}

TEST(MetricsTest, StopwatchAndScopedTimerUseTheInjectedClock) {
  testing::FakeClock clock;
  Stopwatch sw(&clock);
  clock.Advance(absl::Milliseconds(250));
  EXPECT_EQ(sw.Elapsed(), absl::Milliseconds(250));
  sw.Reset();
  EXPECT_EQ(sw.Elapsed(), absl::ZeroDuration());

  Histogram h({0.1, 1});
  {
    ScopedHistogramTimer timer(&h, &clock);
    clock.Advance(absl::Milliseconds(500));
  }
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(h.Sum(), 0.5);
}

TEST(MetricsTest, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(LinearBuckets(0, 5, 3), (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(DefaultLatencyBuckets().front(), 0.0005);
  EXPECT_EQ(DefaultLatencyBuckets().back(), 10);
}

}  // namespace
}  // namespace pdc
