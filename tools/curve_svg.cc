#include "tools/curve_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln {

namespace {

constexpr double kWidth = 760, kHeight = 420, kLeft = 70, kRight = 70, kTop = 40, kBottom = 50;
const char* const kColors[] = {"#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string TrainingCurveSvg(const TrainingCurve& curve) {
  int64_t max_iter = 1;
  double max_loss = 1e-9;
  for (const auto& [it, v] : curve.loss) {
    max_iter = std::max(max_iter, it);
    if (std::isfinite(v)) max_loss = std::max(max_loss, v);
  }
  double max_test = 1.0;  // accuracies: the right axis is 0..1 unless an output is larger
  for (const auto& [name, series] : curve.tests) {
    for (const auto& [it, v] : series.points) {
      max_iter = std::max(max_iter, it);
      if (!std::isfinite(v)) continue;
      double& top = series.is_loss ? max_loss : max_test;
      top = std::max(top, v);
    }
  }
  // The per-iteration loss is noisy: a running mean over 1/200 of the run shows the trend.
  std::vector<std::pair<int64_t, double>> smooth;
  const size_t window = std::max<size_t>(1, curve.loss.size() / 200);
  double sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < curve.loss.size(); ++i) {
    if (std::isfinite(curve.loss[i].second)) {
      sum += curve.loss[i].second;
      ++count;
    }
    if (i >= window && std::isfinite(curve.loss[i - window].second)) {
      sum -= curve.loss[i - window].second;
      --count;
    }
    if (count > 0) smooth.push_back({curve.loss[i].first, sum / count});
  }
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  auto x = [&](int64_t it) { return kLeft + w * static_cast<double>(it) / max_iter; };
  auto y_loss = [&](double v) { return kTop + h * (1.0 - std::min(v, max_loss) / max_loss); };
  auto y_test = [&](double v) { return kTop + h * (1.0 - std::min(v, max_test) / max_test); };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" font-size=\"15\">%s</text>\n",
      kWidth, kHeight, kLeft, Escape(curve.title));
  // Axes and grid (five steps on each axis).
  for (int i = 0; i <= 5; ++i) {
    const double gy = kTop + h * i / 5.0;
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n"
        "<text x=\"%.1f\" y=\"%.1f\">%.3g</text>\n",
        kLeft, gy, kLeft + w, gy, kLeft - 6, gy + 4, max_loss * (5 - i) / 5.0, kLeft + w + 6,
        gy + 4, max_test * (5 - i) / 5.0);
    const double gx = kLeft + w * i / 5.0;
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n",
                          gx, kTop + h + 18, static_cast<long long>(max_iter * i / 5));
  }
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#444\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                        "text-anchor=\"middle\">iteration</text>\n",
                        kLeft, kTop, w, h, kLeft + w / 2, kHeight - 12);
  // The loss.
  std::string points;
  for (const auto& [it, v] : smooth) {
    absl::StrAppendFormat(&points, "%.1f,%.1f ", x(it), y_loss(v));
  }
  absl::StrAppendFormat(&svg,
                        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
                        "points=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#1f77b4\">loss "
                        "(left, running mean)</text>\n",
                        points, kLeft + 8, kTop + 16);
  int color = 0;
  for (const auto& [name, series] : curve.tests) {
    const char* c = kColors[color % 5];
    std::string pts;
    for (const auto& [it, v] : series.points) {
      if (!std::isfinite(v)) continue;
      const double y = series.is_loss ? y_loss(v) : y_test(v);
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", x(it), y);
      absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x(it),
                            y, c);
    }
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                          "points=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">test %s "
                          "(%s)</text>\n",
                          c, pts, kLeft + 8, kTop + 32 + 16 * color, c, Escape(name),
                          series.is_loss ? "left" : "right");
    ++color;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kiln
