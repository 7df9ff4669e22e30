// Line charts as self-contained SVG (no dependencies): latency and
// throughput against batch size or concurrency, one panel each.
#pragma once

#include <string>
#include <vector>

namespace kiln::bench {

struct ChartPoint {
  double x = 0;
  double y = 0;
  bool contended = false;  // drawn hollow: taken while other processes used the CPU
};

struct ChartSeries {
  std::string name;
  std::vector<ChartPoint> points;  // drawn in order
  bool dashed = false;
};

struct ChartPanel {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log2_x = false;  // for batch sizes and concurrencies such as 1, 4, 16, 64
  std::vector<ChartSeries> series;
};

struct Chart {
  std::string title;
  std::string subtitle;  // the model, the machine, how many runs
  std::vector<ChartPanel> panels;  // side by side
};

// The chart as an SVG document: panels side by side, each with axes, ticks,
// labels, a legend and its series as lines with point markers; a footnote
// explains hollow markers when any point is contended. Non-finite points
// are skipped; an empty panel still gets its axes.
std::string RenderSvg(const Chart& chart);

// "&", "<", ">", '"' and "'" escaped for SVG text and attributes.
std::string EscapeXml(const std::string& text);

}  // namespace kiln::bench
