#include "eval/report/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

#include "policy/spec.h"

namespace hqekv::eval {
namespace {

// Okabe & Ito (2008), "Color Universal Design": blue, orange, bluish green,
// vermillion, reddish purple, sky blue, yellow, black (black last, so the
// first styles stay distinct from the grey frontier).
const char* const kColors[kPaletteSize] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                           "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

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

size_t SvgTextChars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

const char* StyleColour(int style) { return kColors[style % kPaletteSize]; }

int StyleShape(int style) { return (style + style / kPaletteSize) % kPaletteSize; }

int FamilyStyle(const std::string& family) {
  const auto& table = policy::PolicyTable();
  const int n = static_cast<int>(table.size());
  int at = -1, first = 0;
  for (int i = 0; i < n; ++i) {
    if (table[i].name == family) at = i;
    if (table[i].name == "hqekv") first = i;
  }
  if (at >= 0) return (at - first + n) % n;
  uint32_t h = 2166136261u;  // FNV-1a: the same style for the same name in every run
  for (unsigned char c : family) h = (h ^ c) * 16777619u;
  return n + static_cast<int>(h % static_cast<uint32_t>(std::max(1, 64 - n)));
}

double TextWidth(const std::string& text, double font_size) {
  return 0.62 * font_size * static_cast<double>(SvgTextChars(text));
}

SvgTitle RenderTitle(const std::string& title, double x, double y, const char* anchor,
                     double max_width, int font_size) {
  std::vector<std::string> lines(1);
  std::istringstream words(title);
  for (std::string w; words >> w;) {
    std::string& cur = lines.back();
    if (!cur.empty() && TextWidth(cur + " " + w, font_size) > max_width)
      lines.push_back(w);
    else
      cur += (cur.empty() ? "" : " ") + w;
  }
  SvgTitle t;
  t.lines = static_cast<int>(lines.size());
  char buf[96];
  for (size_t i = 0; i < lines.size(); ++i) {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"", x,
                  y + 1.2 * font_size * static_cast<double>(i), anchor);
    t.svg += buf;
    t.svg += " font-size=\"" + std::to_string(font_size) + "\" font-weight=\"bold\"";
    // One word longer than the line: squeezed to fit rather than cut off.
    if (TextWidth(lines[i], font_size) > max_width) {
      std::snprintf(buf, sizeof buf, " textLength=\"%.1f\" lengthAdjust=\"spacingAndGlyphs\"",
                    max_width);
      t.svg += buf;
    }
    t.svg += ">" + XmlEscape(lines[i]) + "</text>\n";
  }
  return t;
}

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
  const double left = 62, right = 190, bottom = 46;
  const double pw = width - left - right;
  // A long title wraps (each further line moves the frame down); a long
  // legend label widens the picture instead of running off its edge.
  const SvgTitle title = RenderTitle(plot.title, width / 2.0, 18, "middle", width - 16);
  const double top = 30 + 16.8 * (title.lines - 1), ph = height - top - bottom;
  double legend_w = 0;
  for (const auto& s : plot.series) legend_w = std::max(legend_w, TextWidth(s.name, 11));
  width = std::max(width, static_cast<int>(std::ceil(left + pw + 35 + legend_w + 6)));
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
  o << title.svg;
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
    const int style = s.style >= 0 ? s.style : k;
    const char* color = StyleColour(style);
    const int shape = StyleShape(style);
    const std::string dash = s.variant == 0   ? ""
                             : s.variant == 1 ? " stroke-dasharray=\"6,3\""
                                              : " stroke-dasharray=\"2,2\"";
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string poly;
    for (const auto& [x, y] : pts)
      if (std::isfinite(x) && std::isfinite(y)) poly += Num(px(x)) + "," + Num(py(y)) + " ";
    o << "<g class=\"series\" data-name=\"" << XmlEscape(s.name) << "\">";
    if (pts.size() > 1)
      o << "<polyline points=\"" << poly << "\" fill=\"none\" stroke=\"" << color
        << "\" stroke-width=\"1.8\"" << dash << "/>";
    for (const auto& [x, y] : pts)
      if (std::isfinite(x) && std::isfinite(y))
        o << Marker(shape, px(x), py(y), color) << "><title>" << XmlEscape(s.name) << ": ("
          << TickLabel(x) << ", " << TickLabel(y) << ")</title></" << MarkerTag(shape) << ">";
    // Legend entry.
    const double ly = top + 8 + 16 * k;
    o << "<line x1=\"" << Num(left + pw + 12) << "\" y1=\"" << Num(ly) << "\" x2=\""
      << Num(left + pw + 30) << "\" y2=\"" << Num(ly) << "\" stroke=\"" << color
      << "\" stroke-width=\"2.5\"" << dash << "/>" << Marker(shape, left + pw + 21, ly, color)
      << "/>"
      << "<text x=\"" << Num(left + pw + 35) << "\" y=\"" << Num(ly + 4) << "\" font-size=\"11\">"
      << XmlEscape(s.name) << "</text></g>\n";
    ++k;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace hqekv::eval
