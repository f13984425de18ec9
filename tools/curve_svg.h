// A training curve as a self-contained SVG: the training loss (a running mean over 1/200 of the
// run, left axis), the test losses (left axis) and the other test outputs (right axis, 0 to 1
// for accuracies), drawn with plain SVG elements so it needs no plotting library.
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
  std::vector<std::pair<int64_t, double>> loss;  // (iteration, loss), drawn as a running mean
  // A test output: its values, on the loss axis when it is a loss, else on the right axis.
  struct Series {
    bool is_loss = false;
    std::vector<std::pair<int64_t, double>> points;
  };
  std::map<std::string, Series> tests;
};

std::string TrainingCurveSvg(const TrainingCurve& curve);

}  // namespace kiln

#endif  // KILN_TOOLS_CURVE_SVG_H_
