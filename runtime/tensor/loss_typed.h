/* loss_typed.h -- loss.c's fast cross entropy over FS_REAL (typed.h):
 * each row's logsumexp, the mean loss and its gradient; and the loops of
 * the elementwise losses (loss_scalar.h's formulas).  loss.c instantiates
 * them for float (fsN_cross_entropy_forward/backward, the row_lse its
 * class losses use, fsN_ploss_forward/backward's loops), f64_kernels.c for
 * double (cross_entropy and the elementwise losses of float64 tensors).
 *
 * Invariant: one text serves both types; the sums of a row and of the
 * loss accumulate in double whatever the element type.  Included once per
 * translation unit, after loss.h or nn.h. */
#include "typed.h"
#include "loss_scalar.h"

/* logsumexp of one row, max-shifted; the sum is kept in double: the loss is
 * compared with torch to 1e-4 relative and summed over many rows. */
FS_VECTOR_TARGET static double FS_RK(row_lse)(const FS_REAL *x, int64_t C) {
  FS_REAL mx = x[0];
#pragma omp simd reduction(max:mx)
  for (int64_t c = 1; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double s = 0;
#pragma omp simd reduction(+:s)
  for (int64_t c = 0; c < C; c++) s += FS_RVEXP(x[c] - mx);
  return mx + log(s);
}

FS_RPUB double FS_RK(fsN_cross_entropy_forward)(const FS_REAL *logits, const int64_t *targets, int64_t N, int64_t C) {
  double total = 0;
  for (int64_t n = 0; n < N; n++) {
    const FS_REAL *x = logits + n * C;
    total += FS_RK(row_lse)(x, C) - x[targets[n]];
  }
  return N ? total / (double)N : NAN; /* torch: mean over no elements is nan */
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_cross_entropy_backward)(FS_REAL *dlogits, const FS_REAL *logits,
                                                                const int64_t *targets, int64_t N, int64_t C,
                                                                FS_REAL dloss) {
  FS_REAL scale = dloss / (FS_REAL)N;
  for (int64_t n = 0; n < N; n++) {
    const FS_REAL *x = logits + n * C;
    FS_REAL *dx = dlogits + n * C;
    FS_REAL lse = (FS_REAL)FS_RK(row_lse)(x, C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) dx[c] += scale * FS_RVEXP(x[c] - lse);
    dx[targets[n]] -= scale;
  }
}


/* ---- elementwise losses: out[i] = f(x[i], y[i]) (loss.h's fsN_ploss);
 * pw: BCE_LOGITS' pos_weight [n_pw] over the last dim, or NULL ---- */

static inline FS_REAL FS_RK(pw_at)(const FS_REAL *pw, int64_t n_pw, size_t i) {
  return pw ? pw[(int64_t)i % n_pw] : 1;
}

static void FS_RK(ploss_forward)(fsN_ploss op, double param, const FS_REAL *pw, int64_t n_pw, FS_REAL *out,
                                 const FS_REAL *x, const FS_REAL *y, size_t n) {
  FS_REAL p = (FS_REAL)param;
  for (size_t i = 0; i < n; i++) out[i] = FS_RK(ploss1)(op, p, x[i], y[i], FS_RK(pw_at)(pw, n_pw, i));
}

/* dx[i] += g[i] df/dx;  dy[i] += g[i] df/dy  (either may be NULL) */
static void FS_RK(ploss_backward)(fsN_ploss op, double param, const FS_REAL *pw, int64_t n_pw, FS_REAL *dx,
                                  FS_REAL *dy, const FS_REAL *g, const FS_REAL *x, const FS_REAL *y, size_t n) {
  FS_REAL p = (FS_REAL)param;
  for (size_t i = 0; i < n; i++) {
    FS_REAL gx, gy;
    FS_RK(ploss_grad1)(op, p, x[i], y[i], FS_RK(pw_at)(pw, n_pw, i), &gx, &gy);
    if (dx) dx[i] += g[i] * gx;
    if (dy) dy[i] += g[i] * gy;
  }
}
