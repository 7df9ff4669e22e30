// Drawing: a fixed-size panel grid, "nice" linear ticks on y, data-valued
// ticks on a log2 x axis.
#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace kiln::bench {
namespace {

constexpr double kPanelWidth = 520;
constexpr double kPanelHeight = 400;
constexpr double kHeaderHeight = 64;
constexpr double kFooterHeight = 28;
// Plot area inside a panel.
constexpr double kLeft = 78, kRight = 20, kTop = 40, kBottom = 80;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"};

// A tick step of 1, 2 or 5 times a power of ten giving about `count` ticks.
double NiceStep(double span, int count) {
  if (!(span > 0)) return 1;
  const double raw = span / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

std::string FormatTick(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

struct Scale {
  double lo = 0, hi = 1;
  bool log2 = false;
  double Map(double v, double from, double to) const {
    double a = log2 ? std::log2(lo) : lo, b = log2 ? std::log2(hi) : hi, x = log2 ? std::log2(v) : v;
    if (b == a) return (from + to) / 2;
    return from + (x - a) / (b - a) * (to - from);
  }
};

std::string RenderPanel(const ChartPanel& p, double ox, double oy, bool* any_contended) {
  std::string s;
  const double x0 = ox + kLeft, x1 = ox + kPanelWidth - kRight;
  const double y0 = oy + kPanelHeight - kBottom, y1 = oy + kTop;  // y0 is the bottom

  // Ranges over finite points (x > 0 on a log axis).
  std::set<double> xs;
  double ymax = 0;
  for (const ChartSeries& series : p.series) {
    for (const ChartPoint& pt : series.points) {
      if (!std::isfinite(pt.x) || !std::isfinite(pt.y) || (p.log2_x && pt.x <= 0)) continue;
      xs.insert(pt.x);
      ymax = std::max(ymax, pt.y);
    }
  }
  Scale sx;
  sx.log2 = p.log2_x;
  if (!xs.empty()) {
    sx.lo = *xs.begin();
    sx.hi = *xs.rbegin();
  }
  if (sx.hi == sx.lo) {
    sx.lo = p.log2_x ? sx.lo / 2 : sx.lo - 1;
    sx.hi = p.log2_x ? sx.hi * 2 : sx.hi + 1;
  }
  const double ystep = NiceStep(ymax > 0 ? ymax : 1, 5);
  Scale sy;
  sy.lo = 0;
  sy.hi = std::max(ystep, std::ceil((ymax > 0 ? ymax : 1) * 1.05 / ystep) * ystep);

  s += fmt::format("<g class=\"panel\">\n<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"title\" text-anchor=\"middle\">{}</text>\n",
                   (x0 + x1) / 2, oy + 22, EscapeXml(p.title));
  // Grid and y ticks.
  for (double v = 0; v <= sy.hi + ystep / 2; v += ystep) {
    const double y = sy.Map(v, y0, y1);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>\n", x0, y, x1, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", x0 - 6, y + 4,
                     FormatTick(v));
  }
  // X ticks: the data's x values on a log axis, nice steps on a linear one.
  std::vector<double> xticks;
  if (p.log2_x || xs.size() <= 8) {
    xticks.assign(xs.begin(), xs.end());
  } else {
    const double step = NiceStep(sx.hi - sx.lo, 6);
    for (double v = std::ceil(sx.lo / step) * step; v <= sx.hi + step / 2; v += step) xticks.push_back(v);
  }
  for (double v : xticks) {
    const double x = sx.Map(v, x0, x1);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"axis\"/>\n", x, y0, x,
                     y0 + 5);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", x, y0 + 19,
                     FormatTick(v));
  }
  // Axes and their labels.
  s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"axis\"/>\n", x0, y0, x1, y0);
  s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"axis\"/>\n", x0, y0, x0, y1);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\" text-anchor=\"middle\">{}</text>\n", (x0 + x1) / 2,
                   y0 + 40, EscapeXml(p.x_label));
  s += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 {:.1f} {:.1f})\">{}</text>\n",
      ox + 20, (y0 + y1) / 2, ox + 20, (y0 + y1) / 2, EscapeXml(p.y_label));

  // Series.
  for (size_t i = 0; i < p.series.size(); ++i) {
    const ChartSeries& series = p.series[i];
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    std::string markers;
    for (const ChartPoint& pt : series.points) {
      if (!std::isfinite(pt.x) || !std::isfinite(pt.y) || (p.log2_x && pt.x <= 0)) continue;
      const double x = sx.Map(pt.x, x0, x1), y = sy.Map(pt.y, y0, y1);
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", x, y);
      markers += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" stroke=\"{}\" fill=\"{}\"/>\n", x, y, color,
                             pt.contended ? "white" : color);
      *any_contended = *any_contended || pt.contended;
    }
    s += fmt::format("<g class=\"series\" data-name=\"{}\">\n", EscapeXml(series.name));
    if (!path.empty()) {
      s += fmt::format("<path d=\"{}\" stroke=\"{}\" fill=\"none\" stroke-width=\"2\"{}/>\n", path, color,
                       series.dashed ? " stroke-dasharray=\"6 4\"" : "");
    }
    s += markers + "</g>\n";
    // Legend entry: a row under the x axis label, clear of the data.
    const double lx = x0 + 150 * static_cast<double>(i), ly = y0 + 64;
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
                     lx, ly, lx + 24, ly, color, series.dashed ? " stroke-dasharray=\"6 4\"" : "");
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text>\n", lx + 30, ly + 4,
                     EscapeXml(series.name));
  }
  s += "</g>\n";
  return s;
}

}  // namespace

std::string EscapeXml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderSvg(const Chart& chart) {
  const size_t panels = std::max<size_t>(1, chart.panels.size());
  const double width = kPanelWidth * static_cast<double>(panels);
  const double height = kHeaderHeight + kPanelHeight + kFooterHeight;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\">\n"
      "<style>\n"
      "text {{ font-family: sans-serif; fill: #222; }}\n"
      ".heading {{ font-size: 17px; font-weight: bold; }}\n"
      ".subtitle {{ font-size: 12px; fill: #555; }}\n"
      ".title {{ font-size: 14px; font-weight: bold; }}\n"
      ".label {{ font-size: 12px; }}\n"
      ".tick {{ font-size: 11px; fill: #444; }}\n"
      ".legend {{ font-size: 12px; }}\n"
      ".note {{ font-size: 11px; fill: #555; }}\n"
      ".axis {{ stroke: #333; stroke-width: 1; }}\n"
      ".grid {{ stroke: #ddd; stroke-width: 1; }}\n"
      "</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += fmt::format("<text x=\"16\" y=\"26\" class=\"heading\">{}</text>\n", EscapeXml(chart.title));
  s += fmt::format("<text x=\"16\" y=\"46\" class=\"subtitle\">{}</text>\n", EscapeXml(chart.subtitle));
  bool any_contended = false;
  for (size_t i = 0; i < chart.panels.size(); ++i) {
    s += RenderPanel(chart.panels[i], kPanelWidth * static_cast<double>(i), kHeaderHeight, &any_contended);
  }
  if (any_contended) {
    s += fmt::format(
        "<text x=\"16\" y=\"{:.0f}\" class=\"note\">Hollow markers: measured while other processes used more "
        "than the threshold of CPU (contended).</text>\n",
        height - 10);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace kiln::bench
