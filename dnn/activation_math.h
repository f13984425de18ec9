// The activation formulas, written once for the CPU reference (double) and the CUDA kernels
// (float), so both compute the same function and the same gradient, Caffe's conventions
// included (the ReLU slope and the ELU gradient at x <= 0, a zero power gradient when power or
// scale is 0).
#ifndef KILN_DNN_ACTIVATION_MATH_H_
#define KILN_DNN_ACTIVATION_MATH_H_

#include <cmath>

#include "dnn/host_device.h"

namespace kiln {
namespace dnn {

// ActivationMode's values, for device code that cannot include the descriptor header.
enum ActivationKind : int {
  kActRelu,
  kActClippedRelu,
  kActSigmoid,
  kActTanh,
  kActElu,
  kActPower,
  kActAbs,
  kActIdentity
};

template <typename T>
struct ActivationParams {
  int kind = kActRelu;
  T coef = 0, power = 1, scale = 1, shift = 0;
};

template <typename T>
KILN_HD T ActivationValue(const ActivationParams<T>& p, T x) {
  switch (p.kind) {
    case kActRelu:
      return x > T(0) ? x : p.coef * x;
    case kActClippedRelu:
      return x < T(0) ? T(0) : (x > p.coef ? p.coef : x);
    case kActSigmoid:
      return T(1) / (T(1) + exp(-x));
    case kActTanh:
      return tanh(x);
    case kActElu:
      return x > T(0) ? x : p.coef * (exp(x) - T(1));
    case kActPower:
      return pow(p.shift + p.scale * x, p.power);
    case kActAbs:
      return fabs(x);
    default:
      return x;
  }
}

// dL/dx from dL/dy, with y the forward output for x.
template <typename T>
KILN_HD T ActivationGradient(const ActivationParams<T>& p, T y, T dy, T x) {
  switch (p.kind) {
    case kActRelu:
      return x > T(0) ? dy : p.coef * dy;
    case kActClippedRelu:
      return x > T(0) && x < p.coef ? dy : T(0);
    case kActSigmoid:
      return dy * y * (T(1) - y);
    case kActTanh:
      return dy * (T(1) - y * y);
    case kActElu:
      return x > T(0) ? dy : dy * (y + p.coef);
    case kActPower:
      if (p.power == T(0) || p.scale == T(0)) return T(0);
      return dy * p.power * p.scale * pow(p.shift + p.scale * x, p.power - T(1));
    case kActAbs:
      return x > T(0) ? dy : (x < T(0) ? -dy : T(0));
    default:
      return dy;
  }
}

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_ACTIVATION_MATH_H_
