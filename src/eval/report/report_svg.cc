#include "eval/report/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace hqekv::eval {
namespace {

// Okabe & Ito (2008), "Color Universal Design": black, orange, sky blue,
// bluish green, yellow, blue, vermillion, reddish purple.
const char* const kColors[kPaletteSize] = {"#000000", "#E69F00", "#56B4E9", "#009E73",
                                           "#F0E442", "#0072B2", "#D55E00", "#CC79A7"};

// Marker `shape` (0..7) centred on (x, y), filled with `color`.
std::string Marker(int shape, double x, double y, const char* color) {
  char buf[512];
  const double r = 4;
  switch (shape % kPaletteSize) {
    case 0:
      std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.6\" fill=\"%s\"", x, y,
                    color);
      break;
    case 1:
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
                    x - r * 0.8, y - r * 0.8, r * 1.6, r * 1.6, color);
      break;
    case 2:  // triangle up
      std::snprintf(buf, sizeof buf,
                    "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"", x, y - r * 1.1,
                    x - r, y + r * 0.8, x + r, y + r * 0.8, color);
      break;
    case 3:  // diamond
      std::snprintf(buf, sizeof buf,
                    "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"", x,
                    y - r * 1.2, x + r, y, x, y + r * 1.2, x - r, y, color);
      break;
    case 4:  // triangle down
      std::snprintf(buf, sizeof buf,
                    "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"", x, y + r * 1.1,
                    x - r, y - r * 0.8, x + r, y - r * 0.8, color);
      break;
    case 5:  // hollow circle
      std::snprintf(buf, sizeof buf,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.6\" fill=\"#fff\" stroke=\"%s\" "
                    "stroke-width=\"1.8\"",
                    x, y, color);
      break;
    case 6:  // cross
      std::snprintf(buf, sizeof buf,
                    "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\" "
                    "stroke-width=\"2.2\"",
                    x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r, color);
      break;
    default:  // hollow square
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fff\" "
                    "stroke=\"%s\" stroke-width=\"1.8\"",
                    x - r * 0.8, y - r * 0.8, r * 1.6, r * 1.6, color);
  }
  return buf;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickLabel(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5))
    std::snprintf(buf, sizeof buf, "%.0e", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// About 5 round ticks covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi) {
  const double span = hi - lo;
  const double raw = span / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * span; v += step)
    t.push_back(std::fabs(v) < 1e-12 * span ? 0 : v);
  return t;
}

const char* MarkerTag(int shape) {
  switch (shape % kPaletteSize) {
    case 0:
    case 5:
      return "circle";
    case 1:
    case 7:
      return "rect";
    case 6:
      return "path";
    default:
      return "polygon";
  }
}

}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string RenderSvg(const Plot& plot, int width, int height) {
  const double left = 62, right = 190, top = 30, bottom = 46;
  const double pw = width - left - right, ph = height - top - bottom;
  auto ty = [&](double y) { return plot.log_y ? std::log10(std::max(y, plot.y_floor)) : y; };

  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : plot.series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, ty(y));
      y1 = std::max(y1, ty(y));
    }
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" << width
    << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << " " << height
    << "\" role=\"img\" aria-label=\"" << XmlEscape(plot.title) << "\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  o << "<text x=\"" << width / 2
    << "\" y=\"18\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
    << XmlEscape(plot.title) << "</text>\n";
  if (!(x0 <= x1)) {
    o << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
      << "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return o.str();
  }
  if (plot.y_unit) {
    y0 = 0;
    y1 = 1;
  }
  const bool x_nonneg = x0 >= 0, y_nonneg = !plot.log_y && y0 >= 0;
  // One value: +-10% around it (+-1 around 0); a log axis: one decade each way.
  auto widen = [](double& lo, double& hi, bool log) {
    if (hi - lo >= 1e-12) return;
    const double h = log ? 1.0 : (lo == 0 ? 1.0 : std::fabs(lo) * 0.1);
    lo -= h;
    hi += h;
  };
  widen(x0, x1, false);
  widen(y0, y1, plot.log_y);
  const double xpad = (x1 - x0) * 0.04, ypad = plot.y_unit ? 0.02 : (y1 - y0) * 0.06;
  x0 -= xpad;
  x1 += xpad;
  y0 -= ypad;
  y1 += ypad;
  if (x_nonneg) x0 = std::max(x0, 0.0);
  if (y_nonneg && !plot.y_unit) y0 = std::max(y0, 0.0);
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + (1 - (ty(y) - y0) / (y1 - y0)) * ph; };
  auto py_axis = [&](double v) { return top + (1 - (v - y0) / (y1 - y0)) * ph; };

  // Frame, grid, ticks.
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << Num(pw) << "\" height=\""
    << Num(ph) << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (double t : NiceTicks(x0, x1)) {
    o << "<line x1=\"" << Num(px(t)) << "\" y1=\"" << top << "\" x2=\"" << Num(px(t)) << "\" y2=\""
      << Num(top + ph) << "\" stroke=\"#e4e4e4\"/>";
    o << "<text x=\"" << Num(px(t)) << "\" y=\"" << Num(top + ph + 15)
      << "\" text-anchor=\"middle\" font-size=\"11\">" << TickLabel(t) << "</text>\n";
  }
  std::vector<double> yticks;
  if (plot.log_y) {  // every decade in range, each labelled
    for (double d = std::ceil(y0 - 1e-9); d <= y1 + 1e-9; d += 1) yticks.push_back(d);
  } else {
    yticks = NiceTicks(y0, y1);
  }
  for (double t : yticks) {
    const std::string label = plot.log_y ? TickLabel(std::pow(10, t)) : TickLabel(t);
    o << "<line x1=\"" << left << "\" y1=\"" << Num(py_axis(t)) << "\" x2=\"" << Num(left + pw)
      << "\" y2=\"" << Num(py_axis(t)) << "\" stroke=\"#e4e4e4\"/>";
    o << "<text x=\"" << left - 5 << "\" y=\"" << Num(py_axis(t) + 4)
      << "\" text-anchor=\"end\" font-size=\"11\">" << label << "</text>\n";
  }
  o << "<text x=\"" << Num(left + pw / 2) << "\" y=\"" << height - 8
    << "\" text-anchor=\"middle\" font-size=\"12\">" << XmlEscape(plot.xlabel) << "</text>\n";
  o << "<text transform=\"translate(14," << Num(top + ph / 2)
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">"
    << XmlEscape(plot.ylabel + (plot.log_y ? " (log)" : "")) << "</text>\n";

  if (!plot.frontier.empty()) {
    auto f = plot.frontier;
    std::sort(f.begin(), f.end());
    std::string poly;
    for (const auto& [x, y] : f)
      if (std::isfinite(x) && std::isfinite(y)) poly += Num(px(x)) + "," + Num(py(y)) + " ";
    o << "<g class=\"frontier\"><polyline points=\"" << poly
      << "\" fill=\"none\" stroke=\"#999\" stroke-width=\"6\" stroke-opacity=\"0.35\" "
         "stroke-linejoin=\"round\"><title>"
      << XmlEscape(plot.frontier_name) << "</title></polyline></g>\n";
  }
  // Series.
  int k = 0;
  for (const auto& s : plot.series) {
    const char* color = kColors[k % kPaletteSize];
    const int shape = (k + k / kPaletteSize) % kPaletteSize;
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string poly;
    for (const auto& [x, y] : pts)
      if (std::isfinite(x) && std::isfinite(y)) poly += Num(px(x)) + "," + Num(py(y)) + " ";
    o << "<g class=\"series\" data-name=\"" << XmlEscape(s.name) << "\">";
    if (pts.size() > 1)
      o << "<polyline points=\"" << poly << "\" fill=\"none\" stroke=\"" << color
        << "\" stroke-width=\"1.8\"/>";
    for (const auto& [x, y] : pts)
      if (std::isfinite(x) && std::isfinite(y))
        o << Marker(shape, px(x), py(y), color) << "><title>" << XmlEscape(s.name) << ": ("
          << TickLabel(x) << ", " << TickLabel(y) << ")</title></" << MarkerTag(shape) << ">";
    // Legend entry.
    const double ly = top + 8 + 16 * k;
    o << "<line x1=\"" << Num(left + pw + 12) << "\" y1=\"" << Num(ly) << "\" x2=\""
      << Num(left + pw + 30) << "\" y2=\"" << Num(ly) << "\" stroke=\"" << color
      << "\" stroke-width=\"2.5\"/>" << Marker(shape, left + pw + 21, ly, color) << "/>"
      << "<text x=\"" << Num(left + pw + 35) << "\" y=\"" << Num(ly + 4) << "\" font-size=\"11\">"
      << XmlEscape(s.name) << "</text></g>\n";
    ++k;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace hqekv::eval
