// A training curve as a self-contained SVG: the loss per iteration (left axis) and the test
// outputs (right axis, 0 to 1 for accuracies), drawn with plain SVG elements so it needs no
// plotting library.
#ifndef KILN_TOOLS_CURVE_SVG_H_
#define KILN_TOOLS_CURVE_SVG_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct TrainingCurve {
  std::string title;
  std::vector<std::pair<int64_t, double>> loss;  // (iteration, smoothed loss)
  // Test output name -> (iteration, value).
  std::map<std::string, std::vector<std::pair<int64_t, double>>> tests;
};

std::string TrainingCurveSvg(const TrainingCurve& curve);

}  // namespace kiln

#endif  // KILN_TOOLS_CURVE_SVG_H_
