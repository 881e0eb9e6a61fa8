/* norm_typed.h -- norm.c's kernels over FS_REAL (typed.h): GroupNorm and
 * RMSNorm, forward and backward (norm.h gives the shapes).  Sums run in the
 * element type within a row (vector lanes) and in double across rows.
 * norm.c instantiates them for float as the fsN_ kernels themselves;
 * f64_cnn_kernels.c for double (static fsN_NAME_f64).
 *
 * Invariant: one text serves both types (the float32 kernels' formulas and
 * loop order); only sqrtf or sqrt differs.  Included once per translation
 * unit, after norm.h. */
#include <math.h>
#include "typed.h"
#include "vmath.h"

FS_RPUB void FS_RK(fsN_groupnorm_forward)(FS_REAL *out, FS_REAL *mean, FS_REAL *rstd, const FS_REAL *x, const FS_REAL *w,
                           const FS_REAL *b, int64_t N, int64_t C, int64_t S, int64_t G, FS_REAL eps) {
  int64_t Cg = C / G, L = Cg * S; /* a group's values are contiguous: channels gCg.. of image n */
  for (int64_t ng = 0; ng < N * G; ng++) {
    const FS_REAL *xp = x + ng * L;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < L; i++) s += xp[i];
    double mu = s / (double)(L ? L : 1);
    for (int64_t i = 0; i < L; i++) ss += (xp[i] - mu) * (xp[i] - mu);
    FS_REAL m = (FS_REAL)mu, r = (FS_REAL)(1.0 / sqrt(ss / (double)(L ? L : 1) + eps));
    mean[ng] = m;
    rstd[ng] = r;
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      FS_REAL sc = r * (w ? w[c] : (FS_REAL)1), sh = (b ? b[c] : (FS_REAL)0) - m * sc;
      const FS_REAL *xc = xp + cg * S;
      FS_REAL *oc = out + ng * L + cg * S;
      for (int64_t i = 0; i < S; i++) oc[i] = xc[i] * sc + sh;
    }
  }
}

FS_RPUB void FS_RK(fsN_groupnorm_backward)(FS_REAL *dx, FS_REAL *dw, FS_REAL *db, const FS_REAL *dout, const FS_REAL *x,
                            const FS_REAL *w, const FS_REAL *mean, const FS_REAL *rstd, int64_t N,
                            int64_t C, int64_t S, int64_t G) {
  int64_t Cg = C / G, L = Cg * S;
  for (int64_t ng = 0; ng < N * G; ng++) {
    FS_REAL m = mean[ng], r = rstd[ng];
    double sd = 0, sdx = 0; /* sums of dxh and dxh xh over the group */
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      const FS_REAL *xc = x + ng * L + cg * S, *dy = dout + ng * L + cg * S;
      double a = 0, k = 0;
      for (int64_t i = 0; i < S; i++) {
        a += dy[i];
        k += dy[i] * (xc[i] - m) * r;
      }
      if (dw) dw[c] += (FS_REAL)k;
      if (db) db[c] += (FS_REAL)a;
      FS_REAL wc = w ? w[c] : (FS_REAL)1;
      sd += wc * a;
      sdx += wc * k;
    }
    if (!dx) continue;
    FS_REAL ma = (FS_REAL)(sd / (double)L), mk = (FS_REAL)(sdx / (double)L);
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      FS_REAL wc = w ? w[c] : (FS_REAL)1;
      const FS_REAL *xc = x + ng * L + cg * S, *dy = dout + ng * L + cg * S;
      FS_REAL *d = dx + ng * L + cg * S;
      for (int64_t i = 0; i < S; i++) d[i] += r * (wc * dy[i] - ma - (xc[i] - m) * r * mk);
    }
  }
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_rmsnorm_forward)(FS_REAL *out, FS_REAL *rstd, const FS_REAL *x, const FS_REAL *w, int64_t M,
                         int64_t D, FS_REAL eps) {
  for (int64_t m = 0; m < M; m++) {
    const FS_REAL *xr = x + m * D;
    FS_REAL *o = out + m * D, ss = 0;
#pragma omp simd reduction(+:ss)
    for (int64_t d = 0; d < D; d++) ss += xr[d] * xr[d];
    FS_REAL r = (FS_REAL)1 / FS_RM(sqrt)(ss / (FS_REAL)(D ? D : 1) + eps);
    rstd[m] = r;
    if (w) {
#pragma omp simd
      for (int64_t d = 0; d < D; d++) o[d] = xr[d] * r * w[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < D; d++) o[d] = xr[d] * r;
    }
  }
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_rmsnorm_backward)(FS_REAL *dx, FS_REAL *dw, const FS_REAL *dout, const FS_REAL *x, const FS_REAL *w,
                          const FS_REAL *rstd, int64_t M, int64_t D) {
  for (int64_t m = 0; m < M; m++) {
    const FS_REAL *xr = x + m * D, *dy = dout + m * D;
    FS_REAL r = rstd[m], dot = 0;
    if (dw) {
#pragma omp simd
      for (int64_t d = 0; d < D; d++) dw[d] += dy[d] * xr[d] * r;
    }
    if (!dx) continue;
#pragma omp simd reduction(+:dot)
    for (int64_t d = 0; d < D; d++) dot += (w ? w[d] : (FS_REAL)1) * dy[d] * xr[d];
    FS_REAL k = r * r * r * dot / (FS_REAL)D;
    FS_REAL *d_ = dx + m * D;
#pragma omp simd
    for (int64_t d = 0; d < D; d++) d_[d] += r * (w ? w[d] : (FS_REAL)1) * dy[d] - xr[d] * k;
  }
}
