/* ops_typed.h -- ops.c's elementwise and one-dim kernels over FS_REAL
 * (typed.h): unary functions and their gradients, sum over a dim,
 * softmax / log_softmax.  ops.c instantiates them for float (the cpu
 * kernels of ops.h, under their names), f64.c for double (NAME_f64).
 *
 * Invariant: one text serves both types, so a formula fixed here is fixed
 * for float32 and float64 alike; sums over a row accumulate in double
 * whatever the element type.  Included once per translation unit, after
 * ops.h. */
#include "typed.h"

/* ---- unary ---- */

/* log(1 + e^x) without overflow; torch's softplus (threshold 20) */
static FS_REAL FS_RK(softplus)(FS_REAL x) { return x > (FS_REAL)20 ? x : FS_RM(log1p)(FS_RM(exp)(x)); }

static FS_REAL FS_RK(unary1)(fsU_unary op, FS_REAL x, double p0, double p1) {
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

static void FS_RK(cpu_unary_forward)(fsU_unary op, size_t n, const FS_REAL *x, FS_REAL *y, double p0, double p1) {
  for (size_t i = 0; i < n; i++) y[i] = FS_RK(unary1)(op, x[i], p0, p1);
}

/* d f / d x at x (y = f(x)), times g */
static FS_REAL FS_RK(unary_grad)(fsU_unary op, FS_REAL g, FS_REAL x, FS_REAL y, double p0, double p1) {
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

static void FS_RK(cpu_unary_backward)(fsU_unary op, size_t n, FS_REAL *dx, const FS_REAL *dy, const FS_REAL *x,
                                      const FS_REAL *y, double p0, double p1) {
  for (size_t i = 0; i < n; i++) dx[i] += FS_RK(unary_grad)(op, dy[i], x[i], y[i], p0, p1);
}

/* ---- reductions over one dim: x[O,L,I] ---- */

#define AT(o, l, i) (((o) * L + (l)) * I + (i))

static void FS_RK(cpu_sum_dim_forward)(int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += x[AT(o, l, i)];
      y[o * I + i] = (FS_REAL)s;
    }
}

static void FS_RK(cpu_sum_dim_backward)(int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t l = 0; l < L; l++)
      for (int64_t i = 0; i < I; i++) dx[AT(o, l, i)] += dy[o * I + i];
}

/* the largest of L values at stride I, NaNs skipped as fmaxf skips them
 * (-inf when all are NaN); the comparison keeps libm's call out of the loop */
static inline FS_REAL FS_RK(row_max)(int64_t L, int64_t I, const FS_REAL *x) {
  FS_REAL m = -INFINITY;
  for (int64_t l = 0; l < L; l++)
    if (x[l * I] > m) m = x[l * I];
  return m;
}

static void FS_RK(cpu_softmax_forward)(bool as_log, int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      FS_REAL m = FS_RK(row_max)(L, I, x + AT(o, 0, i));
      double s = 0;
      if (as_log) {
        for (int64_t l = 0; l < L; l++) s += FS_RM(exp)(x[AT(o, l, i)] - m);
        FS_REAL ls = (FS_REAL)log(s);
        for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] = x[AT(o, l, i)] - m - ls;
      } else { /* each exp once: kept in y, then divided by the sum */
        for (int64_t l = 0; l < L; l++) {
          FS_REAL e = FS_RM(exp)(x[AT(o, l, i)] - m);
          y[AT(o, l, i)] = e;
          s += e;
        }
        for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] /= (FS_REAL)s;
      }
    }
}

static void FS_RK(cpu_softmax_backward)(bool log, int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy,
                                        const FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += log ? dy[AT(o, l, i)] : dy[AT(o, l, i)] * y[AT(o, l, i)];
      for (int64_t l = 0; l < L; l++) {
        int64_t k = AT(o, l, i);
        dx[k] += log ? dy[k] - FS_RM(exp)(y[k]) * (FS_REAL)s : y[k] * (dy[k] - (FS_REAL)s);
      }
    }
}
