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
  // Colour and marker: FamilyStyle of the series' policy family, so a family
  // looks the same in every plot; -1 = by the series' position. `variant` > 0
  // (the 2nd, 3rd... policy of one family in a plot) dashes the line.
  int style = -1;
  int variant = 0;
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

// Style number i is drawn with colour StyleColour(i) (Okabe & Ito's
// colour-blind safe palette, 8 colours) and marker shape StyleShape(i), so
// two styles differ in colour and shape for the first 8 and in at least one
// of them up to 64.
inline constexpr int kPaletteSize = 8;
const char* StyleColour(int style);
int StyleShape(int style);

// The style of a policy family ("hqekv", "kivi", "h2o"...), the same in every
// plot of every report and study: its place in the policy table
// (policy::PolicyTable), counted from hqekv so that hqekv is style 0; a name
// not in the table gets a fixed style past the table's.
int FamilyStyle(const std::string& family);

// A plot title as one or more <text> lines, broken at spaces so that no line
// is wider than `max_width` pixels at `font_size` (bold; width estimated at
// 0.62 em per character, wider than the average sans-serif glyph). `anchor`:
// "start" or "middle" at x; first baseline at y, then one line per 1.2 em.
struct SvgTitle {
  std::string svg;
  int lines = 1;
};
SvgTitle RenderTitle(const std::string& title, double x, double y, const char* anchor,
                     double max_width, int font_size = 14);
// Estimated pixel width of `text` at `font_size` (the rule above).
double TextWidth(const std::string& text, double font_size);

// Escapes &, <, >, " for XML text and attributes.
std::string XmlEscape(const std::string& s);

// An <svg> element of the given size: axes with ticks (a log axis labels
// every decade), one polyline with markers per series, a legend on the
// right. Series without points are listed in the legend only. A plot with no
// point at all says "no data". A single x (or y) value gets a range of +-10%
// around it (+-1 around 0), never a negative range for non-negative data.
std::string RenderSvg(const Plot& plot, int width = 620, int height = 340);

}  // namespace hqekv::eval
