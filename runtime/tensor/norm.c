/* norm.c -- cpu kernels of GroupNorm and RMSNorm (norm.h gives the shapes).
 * Sums run in float within a row (vector lanes) and in double across rows. */
#include "norm.h"

#include <math.h>
#include "vmath.h"

void fsN_groupnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int64_t N, int64_t C, int64_t S, int64_t G, float eps) {
  int64_t Cg = C / G, L = Cg * S; /* a group's values are contiguous: channels gCg.. of image n */
  for (int64_t ng = 0; ng < N * G; ng++) {
    const float *xp = x + ng * L;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < L; i++) s += xp[i];
    double mu = s / (double)(L ? L : 1);
    for (int64_t i = 0; i < L; i++) ss += (xp[i] - mu) * (xp[i] - mu);
    float m = (float)mu, r = (float)(1.0 / sqrt(ss / (double)(L ? L : 1) + eps));
    mean[ng] = m;
    rstd[ng] = r;
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      float sc = r * (w ? w[c] : 1.0f), sh = (b ? b[c] : 0.0f) - m * sc;
      const float *xc = xp + cg * S;
      float *oc = out + ng * L + cg * S;
      for (int64_t i = 0; i < S; i++) oc[i] = xc[i] * sc + sh;
    }
  }
}

void fsN_groupnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N,
                            int64_t C, int64_t S, int64_t G) {
  int64_t Cg = C / G, L = Cg * S;
  for (int64_t ng = 0; ng < N * G; ng++) {
    float m = mean[ng], r = rstd[ng];
    double sd = 0, sdx = 0; /* sums of dxh and dxh xh over the group */
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      const float *xc = x + ng * L + cg * S, *dy = dout + ng * L + cg * S;
      double a = 0, k = 0;
      for (int64_t i = 0; i < S; i++) {
        a += dy[i];
        k += dy[i] * (xc[i] - m) * r;
      }
      if (dw) dw[c] += (float)k;
      if (db) db[c] += (float)a;
      float wc = w ? w[c] : 1.0f;
      sd += wc * a;
      sdx += wc * k;
    }
    if (!dx) continue;
    float ma = (float)(sd / (double)L), mk = (float)(sdx / (double)L);
    for (int64_t cg = 0; cg < Cg; cg++) {
      int64_t c = ng % G * Cg + cg;
      float wc = w ? w[c] : 1.0f;
      const float *xc = x + ng * L + cg * S, *dy = dout + ng * L + cg * S;
      float *d = dx + ng * L + cg * S;
      for (int64_t i = 0; i < S; i++) d[i] += r * (wc * dy[i] - ma - (xc[i] - m) * r * mk);
    }
  }
}

FS_VECTOR_TARGET
void fsN_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t M,
                         int64_t D, float eps) {
  for (int64_t m = 0; m < M; m++) {
    const float *xr = x + m * D;
    float *o = out + m * D, ss = 0;
#pragma omp simd reduction(+:ss)
    for (int64_t d = 0; d < D; d++) ss += xr[d] * xr[d];
    float r = 1.0f / sqrtf(ss / (float)(D ? D : 1) + eps);
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

FS_VECTOR_TARGET
void fsN_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int64_t M, int64_t D) {
  for (int64_t m = 0; m < M; m++) {
    const float *xr = x + m * D, *dy = dout + m * D;
    float r = rstd[m], dot = 0;
    if (dw) {
#pragma omp simd
      for (int64_t d = 0; d < D; d++) dw[d] += dy[d] * xr[d] * r;
    }
    if (!dx) continue;
#pragma omp simd reduction(+:dot)
    for (int64_t d = 0; d < D; d++) dot += (w ? w[d] : 1.0f) * dy[d] * xr[d];
    float k = r * r * r * dot / (float)D;
    float *d_ = dx + m * D;
#pragma omp simd
    for (int64_t d = 0; d < D; d++) d_[d] += r * (w ? w[d] : 1.0f) * dy[d] - xr[d] * k;
  }
}
