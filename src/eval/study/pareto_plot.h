// The Pareto plot of one text: KL (log axis, every decade labelled) against
// true bits per original element (log2 axis), one marker shape and colour per
// policy family (Okabe-Ito palette, colour-blind safe), the frontier drawn as
// a step line, a legend. Standalone SVG, deterministic text (no clock, no
// random ids), so regenerated files compare byte for byte.
#pragma once

#include <string>
#include <vector>

namespace hqekv::eval {

struct ParetoPlotPoint {
  std::string family;
  double bits = 0, kl = 0;
  bool frontier = false;
};

// families: every family of the study, each once; the legend lists those
// with a point here, in this order. A family's colour and marker are
// FamilyStyle(family) (report_svg.h), the same in every plot of every report
// (after the 8 colours, hollow markers).
std::string RenderParetoSvg(const std::string& title, const std::vector<std::string>& families,
                            const std::vector<ParetoPlotPoint>& points);

// Okabe-Ito colour and marker shape of style number i (cycled).
const char* ParetoColour(int i);
const char* ParetoShapeName(int i);

}  // namespace hqekv::eval
