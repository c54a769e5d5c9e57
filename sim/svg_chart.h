// Line charts as standalone SVG text, written by the simulator itself (no
// plotting tool needed): axes with round ticks, one polyline per series,
// optional dashes, a legend. Coordinates are printed with fixed precision so
// that the same data gives byte-identical files.
// Thread-safety: pure function.
#ifndef PDC_SIM_SVG_CHART_H_
#define PDC_SIM_SVG_CHART_H_

#include <string>
#include <utility>
#include <vector>

namespace pdc::sim {

struct ChartSeries {
  std::string name;
  std::string color;  // CSS colour, e.g. "#2ca02c"
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct ChartSpec {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  double x_max = 1;       // x axis runs 0..x_max
  double y_max = 1;       // y axis runs 0..y_max
  bool y_percent = true;  // tick labels as percentages of 1.0
  std::vector<ChartSeries> series;
};

std::string RenderLineChart(const ChartSpec& spec);

// Escapes &, <, >, " for SVG/XML text.
std::string XmlEscape(const std::string& s);

}  // namespace pdc::sim

#endif  // PDC_SIM_SVG_CHART_H_
