#include "eval/study/pareto_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "eval/report/report_svg.h"

namespace hqekv::eval {
namespace {

// Style i's colour and shape are the eval report's (report_svg.h:
// StyleColour, StyleShape), so a family looks the same in both.
constexpr const char* kShapes[] = {"circle",        "square", "triangle", "diamond",
                                   "triangle-down", "cross",  "star",     "plus"};
constexpr int kNumColours = kPaletteSize;

int ShapeIndex(int i) { return StyleShape(i); }

}  // namespace

const char* ParetoColour(int i) { return StyleColour(i); }

namespace {

// Plot geometry (pixels).
constexpr int kWidth = 780, kHeight = 470;
constexpr int kLeft = 70, kRight = 200, kTop = 40, kBottom = 56;
constexpr double kMarker = 5.0;  // marker half-size

std::string Coord(double v) {  // coordinates: one decimal, no trailing noise
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// One marker of family i centred at (x, y): filled in the first round of
// colours, hollow (white, coloured outline) in the second.
std::string Marker(int i, double x, double y) {
  const int shape = ShapeIndex(i);
  const double s = kMarker;
  const std::string colour = ParetoColour(i);
  const std::string fill = i / kNumColours % 2 == 0
                               ? " fill=\"" + colour + "\" stroke=\"#222\" stroke-width=\"0.6\""
                               : " fill=\"white\" stroke=\"" + colour + "\" stroke-width=\"1.8\"";
  auto poly = [&](std::initializer_list<std::pair<double, double>> pts) {
    std::string p = "<polygon points=\"";
    bool first = true;
    for (auto [dx, dy] : pts) {
      p += (first ? "" : " ") + Coord(x + dx * s) + "," + Coord(y + dy * s);
      first = false;
    }
    return p + "\"" + fill + "/>";
  };
  switch (shape) {
    case 0:
      return "<circle cx=\"" + Coord(x) + "\" cy=\"" + Coord(y) + "\" r=\"" + Coord(s) + "\"" +
             fill + "/>";
    case 1:
      return "<rect x=\"" + Coord(x - s * 0.9) + "\" y=\"" + Coord(y - s * 0.9) + "\" width=\"" +
             Coord(1.8 * s) + "\" height=\"" + Coord(1.8 * s) + "\"" + fill + "/>";
    case 2:
      return poly({{0, -1.2}, {1.1, 0.9}, {-1.1, 0.9}});
    case 3:
      return poly({{0, -1.3}, {1.3, 0}, {0, 1.3}, {-1.3, 0}});
    case 4:
      return poly({{0, 1.2}, {1.1, -0.9}, {-1.1, -0.9}});
    case 5:  // an x of two bars
      return poly({{-1, -0.6},
                   {-0.6, -1},
                   {0, -0.4},
                   {0.6, -1},
                   {1, -0.6},
                   {0.4, 0},
                   {1, 0.6},
                   {0.6, 1},
                   {0, 0.4},
                   {-0.6, 1},
                   {-1, 0.6},
                   {-0.4, 0}});
    case 6:
      return poly({{0, -1.3},
                   {0.35, -0.45},
                   {1.25, -0.4},
                   {0.55, 0.2},
                   {0.8, 1.1},
                   {0, 0.6},
                   {-0.8, 1.1},
                   {-0.55, 0.2},
                   {-1.25, -0.4},
                   {-0.35, -0.45}});
    default:
      return poly({{-0.35, -1.1},
                   {0.35, -1.1},
                   {0.35, -0.35},
                   {1.1, -0.35},
                   {1.1, 0.35},
                   {0.35, 0.35},
                   {0.35, 1.1},
                   {-0.35, 1.1},
                   {-0.35, 0.35},
                   {-1.1, 0.35},
                   {-1.1, -0.35},
                   {-0.35, -0.35}});
  }
}

// Bit ticks of the log2 x axis.
constexpr double kBitTicks[] = {1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64};

std::string TickLabel(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

const char* ParetoShapeName(int i) { return kShapes[ShapeIndex(i)]; }

std::string RenderParetoSvg(const std::string& title, const std::vector<std::string>& families,
                            const std::vector<ParetoPlotPoint>& points) {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
                  "\" height=\"" + std::to_string(kHeight) + "\" viewBox=\"0 0 " +
                  std::to_string(kWidth) + " " + std::to_string(kHeight) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  // A title wider than the picture wraps; each further line moves the frame down.
  const SvgTitle t = RenderTitle(title, kLeft, 22, "start", kWidth - kLeft - 10);
  s += t.svg;
  const double x0 = kLeft, x1 = kWidth - kRight, y0 = kTop + 16.8 * (t.lines - 1),
               y1 = kHeight - kBottom;
  if (points.empty()) {
    s += "<text x=\"" + Coord((x0 + x1) / 2) + "\" y=\"" + Coord((y0 + y1) / 2) +
         "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return s;
  }
  // Ranges: x in log2(bits), padded; y in whole decades of the positive KLs.
  double bmin = points[0].bits, bmax = points[0].bits, kmin = 0, kmax = 0;
  bool any_zero = false;
  for (const auto& p : points) {
    bmin = std::min(bmin, p.bits);
    bmax = std::max(bmax, p.bits);
    if (p.kl > 0) {
      kmin = kmin > 0 ? std::min(kmin, p.kl) : p.kl;
      kmax = std::max(kmax, p.kl);
    } else {
      any_zero = true;
    }
  }
  if (kmax <= 0) kmin = kmax = 1e-3;  // every KL is 0: an arbitrary decade
  int dlo = static_cast<int>(std::floor(std::log10(kmin)));
  int dhi = static_cast<int>(std::ceil(std::log10(kmax)));
  if (any_zero) --dlo;  // room for the KL = 0 row below the smallest positive KL
  if (dhi <= dlo) dhi = dlo + 1;
  const double lx0 = std::log2(bmin) - 0.08, lx1 = std::log2(bmax) + 0.08;
  auto X = [&](double bits) { return x0 + (std::log2(bits) - lx0) / (lx1 - lx0) * (x1 - x0); };
  auto Y = [&](double kl) {
    const double l = kl > 0 ? std::max(std::log10(kl), static_cast<double>(dlo)) : dlo;
    return y1 - (l - dlo) / (dhi - dlo) * (y1 - y0);
  };
  // Axes, grid and ticks.
  s += "<g stroke=\"#ddd\" stroke-width=\"1\">\n";
  for (int d = dlo; d <= dhi; ++d)
    s += "<line x1=\"" + Coord(x0) + "\" y1=\"" + Coord(Y(std::pow(10.0, d))) + "\" x2=\"" +
         Coord(x1) + "\" y2=\"" + Coord(Y(std::pow(10.0, d))) + "\"/>\n";
  for (double t : kBitTicks) {
    if (std::log2(t) < lx0 || std::log2(t) > lx1) continue;
    s += "<line x1=\"" + Coord(X(t)) + "\" y1=\"" + Coord(y0) + "\" x2=\"" + Coord(X(t)) +
         "\" y2=\"" + Coord(y1) + "\"/>\n";
  }
  s += "</g>\n";
  s += "<rect x=\"" + Coord(x0) + "\" y=\"" + Coord(y0) + "\" width=\"" + Coord(x1 - x0) +
       "\" height=\"" + Coord(y1 - y0) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (int d = dlo; d <= dhi; ++d) {
    std::string label = "1e" + std::to_string(d);
    if (d >= -3 && d <= 3) label = TickLabel(std::pow(10.0, d));
    if (d == dlo && any_zero) label = "0";  // the row of KL = 0 (and below)
    s += "<text x=\"" + Coord(x0 - 6) + "\" y=\"" + Coord(Y(std::pow(10.0, d)) + 4) +
         "\" text-anchor=\"end\">" + label + "</text>\n";
  }
  for (double t : kBitTicks) {
    if (std::log2(t) < lx0 || std::log2(t) > lx1) continue;
    s += "<text x=\"" + Coord(X(t)) + "\" y=\"" + Coord(y1 + 16) + "\" text-anchor=\"middle\">" +
         TickLabel(t) + "</text>\n";
  }
  s += "<text x=\"" + Coord((x0 + x1) / 2) + "\" y=\"" + Coord(y1 + 38) +
       "\" text-anchor=\"middle\">true bits per original element (log scale; fp16 = 16)</text>\n";
  s += "<text transform=\"translate(18," + Coord((y0 + y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">mean KL(fp16 || cache), nats/token (log)</text>\n";
  // The frontier: a step line, best KL reachable with at most x bits.
  std::vector<const ParetoPlotPoint*> front;
  for (const auto& p : points)
    if (p.frontier) front.push_back(&p);
  std::sort(front.begin(), front.end(), [](const ParetoPlotPoint* a, const ParetoPlotPoint* b) {
    return a->bits < b->bits || (a->bits == b->bits && a->kl > b->kl);
  });
  if (!front.empty()) {
    std::string d = "M" + Coord(X(front[0]->bits)) + " " + Coord(Y(front[0]->kl));
    for (size_t i = 1; i < front.size(); ++i)
      d += " H" + Coord(X(front[i]->bits)) + " V" + Coord(Y(front[i]->kl));
    d += " H" + Coord(x1);
    s += "<path d=\"" + d +
         "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n";
  }
  // Points, family by family (legend order), so overlaps are deterministic.
  for (size_t f = 0; f < families.size(); ++f) {
    for (const auto& p : points) {
      if (p.family != families[f]) continue;
      s += Marker(FamilyStyle(families[f]), X(p.bits), Y(p.kl)) + "\n";
    }
  }
  // Legend.
  double ly = y0 + 8;
  const double lx = x1 + 18;
  for (size_t f = 0; f < families.size(); ++f) {
    const bool shown = std::any_of(points.begin(), points.end(), [&](const ParetoPlotPoint& p) {
      return p.family == families[f];
    });
    if (!shown) continue;  // a family without a point here keeps its style for other plots
    s += Marker(FamilyStyle(families[f]), lx, ly) + "\n";
    s += "<text x=\"" + Coord(lx + 12) + "\" y=\"" + Coord(ly + 4) + "\">" +
         XmlEscape(families[f]) + "</text>\n";
    ly += 20;
  }
  s += "<line x1=\"" + Coord(lx - 8) + "\" y1=\"" + Coord(ly) + "\" x2=\"" + Coord(lx + 8) +
       "\" y2=\"" + Coord(ly) +
       "\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n";
  s += "<text x=\"" + Coord(lx + 12) + "\" y=\"" + Coord(ly + 4) + "\">Pareto frontier</text>\n";
  if (any_zero) {
    ly += 22;
    s += "<text x=\"" + Coord(lx - 8) + "\" y=\"" + Coord(ly + 4) +
         "\" font-size=\"10\">KL = 0 drawn on the bottom row</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace hqekv::eval
