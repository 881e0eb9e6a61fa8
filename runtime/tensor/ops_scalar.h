/* ops_scalar.h -- the per-element formulas of the tensor API's unary and
 * binary ops over FS_REAL (typed.h): f(x) and its gradient for fsU_unary,
 * a op b and its two gradients for fsU_binary, torch's formulas.
 *
 * Invariant: one text for the cpu and cuda: ops_typed.h's loops (float in
 * ops.c, double in f64_kernels.c) and f64_cuda.cu's kernels (double) call
 * these, so a formula fixed here is fixed on both devices.  Under nvcc every
 * function is __host__ __device__ (FS_HOSTDEV) and takes CUDA's math
 * functions; in C FS_HOSTDEV (tensor.h) is empty, so the cpu's code is what it was.
 * Needs ops.h (the op enums) first.  The other half: ops_typed.h,
 * f64_cuda.cu. */
#ifndef FS_OPS_SCALAR_H
#define FS_OPS_SCALAR_H

#include "tensor.h" /* FS_HOSTDEV */
#include "typed.h"

/* log(1 + e^x) without overflow; torch's softplus (threshold 20) */
static inline FS_HOSTDEV FS_REAL FS_RK(softplus)(FS_REAL x) {
  return x > (FS_REAL)20 ? x : FS_RM(log1p)(FS_RM(exp)(x));
}

static inline FS_HOSTDEV FS_REAL FS_RK(unary1)(fsU_unary op, FS_REAL x, double p0, double p1) {
  switch (op) {
  case FSU_EXP: return FS_RM(exp)(x);
  case FSU_LOG: return FS_RM(log)(x);
  case FSU_SQRT: return FS_RM(sqrt)(x);
  case FSU_RSQRT: return (FS_REAL)1 / FS_RM(sqrt)(x);
  case FSU_ABS: return FS_RM(fabs)(x);
  case FSU_SIN: return FS_RM(sin)(x);
  case FSU_COS: return FS_RM(cos)(x);
  case FSU_TANH: return FS_RM(tanh)(x);
  case FSU_SIGMOID: return (FS_REAL)1 / ((FS_REAL)1 + FS_RM(exp)(-x));
  case FSU_POW: return FS_RM(pow)(x, (FS_REAL)p0);
  case FSU_RELU: return x > 0 ? x : 0;
  case FSU_LEAKY_RELU: return x > 0 ? x : x * (FS_REAL)p0;
  case FSU_MISH: return x * FS_RM(tanh)(FS_RK(softplus)(x));
  case FSU_CLAMP: /* torch: min(max(x, lo), hi), NaN x stays NaN */
    if (!isnan(p0) && x < (FS_REAL)p0) x = (FS_REAL)p0;
    if (!isnan(p1) && x > (FS_REAL)p1) x = (FS_REAL)p1;
    return x;
  }
  return x;
}

/* d f / d x at x (y = f(x)), times g */
static inline FS_HOSTDEV FS_REAL FS_RK(unary_grad)(fsU_unary op, FS_REAL g, FS_REAL x, FS_REAL y, double p0,
                                                   double p1) {
  switch (op) {
  case FSU_EXP: return g * y;
  case FSU_LOG: return g / x;
  case FSU_SQRT: return g / (2 * y);
  case FSU_RSQRT: return (FS_REAL)-0.5 * g * y * y * y;
  case FSU_ABS: return g * (FS_REAL)((x > 0) - (x < 0)); /* sgn: 0 at 0 */
  case FSU_SIN: return g * FS_RM(cos)(x);
  case FSU_COS: return -g * FS_RM(sin)(x);
  case FSU_TANH: return g * (1 - y * y);
  case FSU_SIGMOID: return g * y * (1 - y);
  case FSU_POW: return p0 == 0 ? 0 : g * (FS_REAL)p0 * FS_RM(pow)(x, (FS_REAL)p0 - 1);
  case FSU_RELU: return x > 0 ? g : 0;
  case FSU_LEAKY_RELU: return x > 0 ? g : g * (FS_REAL)p0;
  case FSU_MISH: { /* tanh(sp) + x sech^2(sp) sigmoid(x) */
    FS_REAL t = FS_RM(tanh)(FS_RK(softplus)(x)), s = (FS_REAL)1 / ((FS_REAL)1 + FS_RM(exp)(-x));
    return g * (t + x * (1 - t * t) * s);
  }
  case FSU_CLAMP: /* torch: the gradient passes where lo <= x <= hi */
    return (isnan(p0) || x >= (FS_REAL)p0) && (isnan(p1) || x <= (FS_REAL)p1) ? g : 0;
  }
  return 0;
}

static inline FS_HOSTDEV FS_REAL FS_RK(binary1)(fsU_binary op, FS_REAL a, FS_REAL b) {
  switch (op) {
  case FSU_ADD: return a + b;
  case FSU_SUB: return a - b;
  case FSU_MUL: return a * b;
  case FSU_DIV: return a / b;
  case FSU_POWT: return FS_RM(pow)(a, b);
  case FSU_MAXIMUM: return isnan(a) || a > b ? a : b; /* NaN propagates */
  case FSU_MINIMUM: return isnan(a) || a < b ? a : b;
  }
  return 0;
}

/* d out / d a, d b of one element; torch's formulas */
static inline FS_HOSTDEV void FS_RK(binary_grad1)(fsU_binary op, FS_REAL g, FS_REAL x, FS_REAL y, FS_REAL o,
                                                   FS_REAL *ga_, FS_REAL *gb_) {
  FS_REAL ga = 0, gb = 0;
  switch (op) {
  case FSU_ADD: ga = g; gb = g; break;
  case FSU_SUB: ga = g; gb = -g; break;
  case FSU_MUL: ga = g * y; gb = g * x; break;
  case FSU_DIV: ga = g / y; gb = -g * x / (y * y); break;
  case FSU_POWT: /* torch masks the 0 * inf cases of b = 0 and a = 0 */
    ga = y == 0 ? 0 : g * y * FS_RM(pow)(x, y - 1);
    gb = x == 0 && y >= 0 ? 0 : g * o * FS_RM(log)(x);
    break;
  case FSU_MAXIMUM: case FSU_MINIMUM: { /* ties split the gradient in half */
    bool a_wins = op == FSU_MAXIMUM ? x > y : x < y;
    ga = x == y ? g / 2 : a_wins ? g : 0;
    gb = x == y ? g / 2 : a_wins ? 0 : g;
    break;
  }
  }
  *ga_ = ga;
  *gb_ = gb;
}

#endif
