#include "eval/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace hqekv::eval {
namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
                               "#8c6d31", "#843c39", "#7b4173", "#3182bd"};

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
  if (x1 - x0 < 1e-12) {
    x0 -= 0.5;
    x1 += 0.5;
  }
  if (y1 - y0 < 1e-12) {
    y0 -= plot.log_y ? 0.5 : std::max(0.5, std::fabs(y0) * 0.1);
    y1 += plot.log_y ? 0.5 : std::max(0.5, std::fabs(y1) * 0.1);
  }
  const double xpad = (x1 - x0) * 0.04, ypad = plot.y_unit ? 0.02 : (y1 - y0) * 0.06;
  x0 -= xpad;
  x1 += xpad;
  y0 -= ypad;
  y1 += ypad;
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
  for (double t : NiceTicks(y0, y1)) {
    const std::string label = plot.log_y ? TickLabel(std::pow(10, t)) : TickLabel(t);
    if (plot.log_y && std::fabs(t - std::round(t)) > 1e-9) continue;  // decades only
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

  // Series.
  int k = 0;
  for (const auto& s : plot.series) {
    const char* color = kColors[k % (sizeof kColors / sizeof kColors[0])];
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
        o << "<circle cx=\"" << Num(px(x)) << "\" cy=\"" << Num(py(y)) << "\" r=\"3.2\" fill=\""
          << color << "\"><title>" << XmlEscape(s.name) << ": (" << TickLabel(x) << ", "
          << TickLabel(y) << ")</title></circle>";
    // Legend entry.
    const double ly = top + 8 + 16 * k;
    o << "<line x1=\"" << Num(left + pw + 12) << "\" y1=\"" << Num(ly) << "\" x2=\""
      << Num(left + pw + 30) << "\" y2=\"" << Num(ly) << "\" stroke=\"" << color
      << "\" stroke-width=\"2.5\"/><text x=\"" << Num(left + pw + 35) << "\" y=\"" << Num(ly + 4)
      << "\" font-size=\"11\">" << XmlEscape(s.name) << "</text></g>\n";
    ++k;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace hqekv::eval
