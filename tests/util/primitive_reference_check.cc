#include "tests/util/primitive_reference_check.h"

#include <random>

namespace kiln {
namespace primitives_test {

void CheckUnary(const UnaryOp& op, const Vec& x, testing::GradientCheck check) {
  std::mt19937 rng(7);
  auto f = [&](const Vec& at) {
    Vec y(op.out.BufferElements(), 0.0);
    op.forward(at, y);
    return y;
  };
  const Vec y = f(x);
  const Vec dy = testing::Uniform(op.out.BufferElements(), -1, 1, rng);
  Vec dx(op.in.BufferElements(), 0.0);
  op.backward(x, y, dy, dx);
  testing::ExpectGradient(op.name, check, x, f, dy, dx);
}

}  // namespace primitives_test
}  // namespace kiln
