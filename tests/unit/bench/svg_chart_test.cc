// SVG charts: document shape, one path and one marker per point per series,
// escaping, hollow markers for contended points, robustness to odd data.
#include "bench/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace kiln::bench {
namespace svg_chart_tests {

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

// Lines that start with `start` and contain `text`.
size_t CountLines(const std::string& svg, const std::string& start, const std::string& text) {
  size_t n = 0, pos = 0;
  while (pos < svg.size()) {
    size_t eol = svg.find('\n', pos);
    std::string line = svg.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (line.rfind(start, 0) == 0 && line.find(text) != std::string::npos) ++n;
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return n;
}

Chart TwoPanels() {
  Chart c;
  c.title = "latency <&> \"throughput\"";
  c.subtitle = "tiny model";
  ChartPanel a;
  a.title = "TTFT";
  a.x_label = "batch size";
  a.y_label = "ms";
  a.log2_x = true;
  a.series = {{"p50", {{1, 10}, {4, 20}, {16, 80}}, false}, {"p90", {{1, 12}, {4, 30}, {16, 95, true}}, true}};
  ChartPanel b;
  b.title = "Throughput";
  b.x_label = "concurrency";
  b.y_label = "tokens/s";
  b.series = {{"output", {{1, 100}, {2, 180}}, false}};
  c.panels = {a, b};
  return c;
}

TEST(RenderSvg, DocumentShape) {
  const std::string svg = RenderSvg(TwoPanels());
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<g class=\"panel\">"), 2u);
  EXPECT_EQ(Count(svg, "<g class=\"series\""), 3u);
  EXPECT_EQ(Count(svg, "<path "), 3u);
  EXPECT_EQ(Count(svg, "<circle "), 8u);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2u);  // the dashed series and its legend line
  for (const char* text : {"TTFT", "Throughput", "batch size", "concurrency", "tokens/s", "p50", "p90", "output"}) {
    EXPECT_NE(svg.find(text), std::string::npos) << text;
  }
  // Every element that opens also closes.
  EXPECT_EQ(Count(svg, "<g "), Count(svg, "</g>"));
  EXPECT_EQ(Count(svg, "<text "), Count(svg, "</text>"));
}

TEST(RenderSvg, EscapesText) {
  const std::string svg = RenderSvg(TwoPanels());
  EXPECT_NE(svg.find("latency &lt;&amp;&gt; &quot;throughput&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
  EXPECT_EQ(EscapeXml("a'b"), "a&apos;b");
}

TEST(RenderSvg, HollowMarkersAndFootnoteOnlyWhenContended) {
  Chart c = TwoPanels();
  std::string svg = RenderSvg(c);
  EXPECT_EQ(CountLines(svg, "<circle", "fill=\"white\""), 1u);
  EXPECT_NE(svg.find("Hollow markers"), std::string::npos);
  c.panels[0].series[1].points[2].contended = false;
  svg = RenderSvg(c);
  EXPECT_EQ(CountLines(svg, "<circle", "fill=\"white\""), 0u);
  EXPECT_EQ(svg.find("Hollow markers"), std::string::npos);
}

TEST(RenderSvg, SkipsNonFiniteAndNonPositiveLogPoints) {
  Chart c;
  ChartPanel p;
  p.log2_x = true;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  p.series = {{"s", {{0, 1}, {1, nan}, {2, std::numeric_limits<double>::infinity()}, {4, 3}}, false}};
  c.panels = {p};
  const std::string svg = RenderSvg(c);
  EXPECT_EQ(Count(svg, "<circle "), 1u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(RenderSvg, EmptyChartsStillRender) {
  Chart c;
  c.panels = {ChartPanel{}};
  const std::string svg = RenderSvg(c);
  EXPECT_NE(svg.find("<line"), std::string::npos);  // the axes
  EXPECT_EQ(Count(svg, "<circle "), 0u);
  EXPECT_NE(RenderSvg(Chart{}).find("</svg>"), std::string::npos);
}

}  // namespace svg_chart_tests
}  // namespace kiln::bench
