#include "sim/svg_chart.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pdc::sim {
namespace {

constexpr double kWidth = 760, kHeight = 420;
constexpr double kLeft = 70, kRight = 170, kTop = 56, kBottom = 56;

// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` ticks.
double NiceStep(double range, int ticks) {
  if (range <= 0) return 1;
  const double raw = range / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderLineChart(const ChartSpec& spec) {
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const double x_max = spec.x_max > 0 ? spec.x_max : 1;
  const double y_max = spec.y_max > 0 ? spec.y_max : 1;
  auto X = [&](double x) { return kLeft + x / x_max * pw; };
  auto Y = [&](double y) { return kTop + ph - std::min(y, y_max) / y_max * ph; };

  std::string o = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
      "font-size=\"12\">\n",
      static_cast<int>(kWidth), static_cast<int>(kHeight), static_cast<int>(kWidth),
      static_cast<int>(kHeight));
  absl::StrAppend(&o, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  absl::StrAppend(&o, "<text x=\"", Num(kLeft), "\" y=\"24\" font-size=\"16\" "
                  "font-weight=\"bold\">", XmlEscape(spec.title), "</text>\n");
  absl::StrAppend(&o, "<text x=\"", Num(kLeft), "\" y=\"42\" fill=\"#555\">",
                  XmlEscape(spec.subtitle), "</text>\n");

  // Grid and y ticks.
  const double ystep = NiceStep(y_max, 5);
  for (int i = 0; i * ystep <= y_max * 1.0001; ++i) {
    const double v = i * ystep, y = Y(v);
    absl::StrAppend(&o, "<line x1=\"", Num(kLeft), "\" y1=\"", Num(y), "\" x2=\"",
                    Num(kLeft + pw), "\" y2=\"", Num(y),
                    "\" stroke=\"#e5e5e5\"/>\n");
    const std::string label =
        spec.y_percent ? absl::StrFormat("%g%%", std::round(v * 1000) / 10)
                       : absl::StrFormat("%g", v);
    absl::StrAppend(&o, "<text x=\"", Num(kLeft - 8), "\" y=\"", Num(y + 4),
                    "\" text-anchor=\"end\">", label, "</text>\n");
  }
  const double xstep = NiceStep(x_max, 6);
  for (int i = 0; i * xstep <= x_max * 1.0001; ++i) {
    const double v = i * xstep, x = X(v);
    absl::StrAppend(&o, "<line x1=\"", Num(x), "\" y1=\"", Num(kTop + ph), "\" x2=\"",
                    Num(x), "\" y2=\"", Num(kTop + ph + 5), "\" stroke=\"#333\"/>\n");
    absl::StrAppend(&o, "<text x=\"", Num(x), "\" y=\"", Num(kTop + ph + 19),
                    "\" text-anchor=\"middle\">", absl::StrFormat("%g", v),
                    "</text>\n");
  }
  absl::StrAppend(&o, "<rect x=\"", Num(kLeft), "\" y=\"", Num(kTop), "\" width=\"",
                  Num(pw), "\" height=\"", Num(ph),
                  "\" fill=\"none\" stroke=\"#333\"/>\n");
  absl::StrAppend(&o, "<text x=\"", Num(kLeft + pw / 2), "\" y=\"",
                  Num(kHeight - 14), "\" text-anchor=\"middle\">",
                  XmlEscape(spec.x_label), "</text>\n");
  absl::StrAppend(&o, "<text transform=\"translate(18,", Num(kTop + ph / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">", XmlEscape(spec.y_label),
                  "</text>\n");

  // Series and legend.
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const ChartSeries& s = spec.series[i];
    const std::string dash = s.dashed ? " stroke-dasharray=\"6,4\"" : "";
    if (s.points.size() == 1) {
      absl::StrAppend(&o, "<circle cx=\"", Num(X(s.points[0].first)), "\" cy=\"",
                      Num(Y(s.points[0].second)), "\" r=\"3\" fill=\"", s.color,
                      "\"/>\n");
    } else if (!s.points.empty()) {
      absl::StrAppend(&o, "<polyline fill=\"none\" stroke=\"", s.color,
                      "\" stroke-width=\"2\"", dash, " points=\"");
      for (size_t k = 0; k < s.points.size(); ++k) {
        absl::StrAppend(&o, k ? " " : "", Num(X(s.points[k].first)), ",",
                        Num(Y(s.points[k].second)));
      }
      absl::StrAppend(&o, "\"/>\n");
    }
    const double ly = kTop + 10 + 20 * static_cast<double>(i);
    const double lx = kLeft + pw + 14;
    absl::StrAppend(&o, "<line x1=\"", Num(lx), "\" y1=\"", Num(ly), "\" x2=\"",
                    Num(lx + 24), "\" y2=\"", Num(ly), "\" stroke=\"", s.color,
                    "\" stroke-width=\"2\"", dash, "/>\n");
    absl::StrAppend(&o, "<text x=\"", Num(lx + 30), "\" y=\"", Num(ly + 4), "\">",
                    XmlEscape(s.name), "</text>\n");
  }
  absl::StrAppend(&o, "</svg>\n");
  return o;
}

}  // namespace pdc::sim
