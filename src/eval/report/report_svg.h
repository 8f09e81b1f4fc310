// Minimal line-plot renderer producing standalone inline SVG (no script, no
// external resource), for report.html.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hqekv::eval {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); drawn in x order
};

struct Plot {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool log_y = false;  // log10 axis; values below y_floor are drawn at y_floor
  double y_floor = 1e-6;
  bool y_unit = false;  // y axis fixed to [0, 1] (accuracies, agreement)
  // Optional dashed grey line drawn under the series (a Pareto frontier), in x order.
  std::vector<std::pair<double, double>> frontier;
  std::string frontier_name = "Pareto frontier";
};

// Series k is drawn with colour kPalette[k % 8] (Okabe & Ito's colour-blind
// safe palette) and marker shape k % 8, so two series differ in colour and
// shape for the first 8 and in at least one of them up to 64.
inline constexpr int kPaletteSize = 8;

// Escapes &, <, >, " for XML text and attributes.
std::string XmlEscape(const std::string& s);

// An <svg> element of the given size: axes with ticks (a log axis labels
// every decade), one polyline with markers per series, a legend on the
// right. Series without points are listed in the legend only. A plot with no
// point at all says "no data". A single x (or y) value gets a range of +-10%
// around it (+-1 around 0), never a negative range for non-negative data.
std::string RenderSvg(const Plot& plot, int width = 620, int height = 340);

}  // namespace hqekv::eval
