// Reports: fixed formats, escaping, and charts that are well-formed SVG.
#include "sim/report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/svg_chart.h"

namespace pdc::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

RunSummary Sample() {
  RunSummary run;
  run.scenario = "s";
  run.seed = 3;
  run.simulated = 2 * kHour;
  PolicyMetrics m;
  m.policy = "pdc";
  m.restarts = 4;
  m.same_device = 3;
  m.same_node = 4;
  m.latencies = {1000, 2000, 3000, 400000};
  m.unplaced_reasons["pdc: \"quoted\" reason"] = 2;
  m.series.push_back(SeriesPoint{kHour, 2, 1, 0.5, 0.25, 0, 0, 0});
  m.series.push_back(SeriesPoint{2 * kHour, 2, 2, 0.75, 0, 0, 0, 0});
  run.policies.push_back(m);
  return run;
}

TEST(ReportTest, CsvAndJsonCarryTheFigures) {
  const RunSummary run = Sample();
  EXPECT_THAT(SummaryCsv(run), HasSubstr("\npdc,0,0,4,3,0.750000,4,1.000000,"));
  EXPECT_THAT(SummaryJson(run), HasSubstr("\"same_device_rate\": 0.750000"));
  EXPECT_THAT(SummaryJson(run), HasSubstr("\"pdc: \\\"quoted\\\" reason\": 2"));
  EXPECT_THAT(SummaryJson(run), HasSubstr("\"latency_ms\": {\"p50\": 2.0, \"p90\": 400.0"));
  EXPECT_THAT(ReasonsCsv(run), HasSubstr("pdc,unplaced,\"pdc: \"\"quoted\"\" reason\",2"));
  EXPECT_THAT(SeriesCsv(run), HasSubstr("pdc,3600,2,1,0.500000,0.500000,0.250000,"));
  EXPECT_THAT(FormatTable(run), HasSubstr("75.0%"));
}

TEST(ReportTest, ChartsAreSvgWithOneLinePerSeries) {
  const RunSummary run = Sample();
  const std::string same = SameDeviceChart(run);
  EXPECT_THAT(same, StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(same, HasSubstr("</svg>\n"));
  EXPECT_THAT(same, HasSubstr("<polyline"));
  EXPECT_THAT(same, HasSubstr(">pdc</text>"));
  const std::string util = UtilizationChart(run);
  EXPECT_THAT(util, HasSubstr(">pdc used</text>"));
  EXPECT_THAT(util, HasSubstr(">pdc held</text>"));  // held > 0 at one sample
  EXPECT_THAT(util, HasSubstr("stroke-dasharray"));
}

TEST(SvgChartTest, EscapesText) {
  ChartSpec spec;
  spec.title = "a < b & \"c\"";
  spec.series.push_back(ChartSeries{"x>y", "#000", false, {{0, 0}, {1, 1}}});
  const std::string svg = RenderLineChart(spec);
  EXPECT_THAT(svg, HasSubstr("a &lt; b &amp; &quot;c&quot;"));
  EXPECT_THAT(svg, HasSubstr("x&gt;y"));
  EXPECT_EQ(svg.find("a < b"), std::string::npos);
}

}  // namespace
}  // namespace pdc::sim
