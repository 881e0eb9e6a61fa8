/* nn_typed.h -- nn.c's layer kernels over FS_REAL (typed.h): linear,
 * embedding, positional embedding, layer norm, activations and fused causal
 * attention, forward and backward (nn.h gives shapes and conventions).
 * nn.c instantiates them for float as the fsN_ kernels themselves; f64.c
 * for double (static fsN_NAME_f64), the GPT's float64 path.
 *
 * Invariant: one text serves both types (the float32 kernels' formulas,
 * loop order and vectorization); only what typed.h maps differs: libm's
 * float or double names, vmath.h's vectorized exp and erf for float where
 * double takes libm's, sgemm or dgemm.  Included once per translation unit,
 * after nn.h. */
#include <stdlib.h>
#include <string.h>
#include "typed.h"
#include "tensor.h"

FS_RPUB int FS_RK(fsN_linear_forward)(FS_REAL *out, const FS_REAL *inp, const FS_REAL *W, const FS_REAL *b, int64_t N,
                                      int64_t C, int64_t OC) {
  if (b)
    for (int64_t n = 0; n < N; n++) memcpy(out + n * OC, b, (size_t)OC * sizeof *b);
  return FS_RGEMM(false, true, N, OC, C, 1, inp, C, W, C, b ? 1 : 0, out, OC);
}

FS_RPUB FS_VECTOR_TARGET int FS_RK(fsN_linear_backward)(FS_REAL *dinp, FS_REAL *dW, FS_REAL *db, const FS_REAL *dout,
                                                        const FS_REAL *inp, const FS_REAL *W, int64_t N, int64_t C,
                                                        int64_t OC) {
  if (dinp && FS_RGEMM(false, false, N, C, OC, 1, dout, OC, W, C, 1, dinp, C) < 0)
    return -1;
  if (dW && FS_RGEMM(true, false, OC, C, N, 1, dout, OC, inp, C, 1, dW, C) < 0)
    return -1;
  if (db)
    for (int64_t n = 0; n < N; n++) {
      const FS_REAL *row = dout + n * OC;
#pragma omp simd
      for (int64_t o = 0; o < OC; o++) db[o] += row[o];
    }
  return 0;
}

FS_RPUB void FS_RK(fsN_embedding_forward)(FS_REAL *out, const int64_t *idx, const FS_REAL *W, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; n++) memcpy(out + n * D, W + idx[n] * D, (size_t)D * sizeof *W);
}

FS_RPUB void FS_RK(fsN_embedding_backward)(FS_REAL *dW, const FS_REAL *dout, const int64_t *idx, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; n++) {
    FS_REAL *row = dW + idx[n] * D;
    for (int64_t d = 0; d < D; d++) row[d] += dout[n * D + d];
  }
}

FS_RPUB void FS_RK(fsN_posemb_forward)(FS_REAL *out, const FS_REAL *inp, const FS_REAL *W, int64_t B, int64_t T,
                                       int64_t D) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * D; i++) out[b * T * D + i] = inp[b * T * D + i] + W[i];
}

FS_RPUB void FS_RK(fsN_posemb_backward)(FS_REAL *dinp, FS_REAL *dW, const FS_REAL *dout, int64_t B, int64_t T,
                                        int64_t D) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * D; i++) {
      FS_REAL g = dout[b * T * D + i];
      if (dinp) dinp[b * T * D + i] += g;
      if (dW) dW[i] += g;
    }
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_layernorm_forward)(FS_REAL *out, FS_REAL *mean, FS_REAL *rstd,
                                                           const FS_REAL *inp, const FS_REAL *w, const FS_REAL *b,
                                                           int64_t N, int64_t C, FS_REAL eps) {
  for (int64_t n = 0; n < N; n++) {
    const FS_REAL *x = inp + n * C;
    FS_REAL *y = out + n * C;
    FS_REAL m = 0, v = 0;
#pragma omp simd reduction(+:m)
    for (int64_t c = 0; c < C; c++) m += x[c];
    m /= (FS_REAL)C;
#pragma omp simd reduction(+:v)
    for (int64_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    FS_REAL s = (FS_REAL)1 / FS_RM(sqrt)(v / (FS_REAL)C + eps); /* biased variance, as torch */
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_layernorm_backward)(FS_REAL *dinp, FS_REAL *dw, FS_REAL *db,
                                                            const FS_REAL *dout, const FS_REAL *inp, const FS_REAL *w,
                                                            const FS_REAL *mean, const FS_REAL *rstd, int64_t N,
                                                            int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const FS_REAL *x = inp + n * C, *dy = dout + n * C;
    FS_REAL m = mean[n], s = rstd[n];
    FS_REAL dnorm_mean = 0, dnorm_norm_mean = 0;
#pragma omp simd reduction(+:dnorm_mean, dnorm_norm_mean)
    for (int64_t c = 0; c < C; c++) {
      FS_REAL norm = (x[c] - m) * s, dnorm = w[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= (FS_REAL)C;
    dnorm_norm_mean /= (FS_REAL)C;
    /* one loop per output: each vectorizes; a row is in L1 for the next */
    if (db) {
#pragma omp simd
      for (int64_t c = 0; c < C; c++) db[c] += dy[c];
    }
    if (dw) {
#pragma omp simd
      for (int64_t c = 0; c < C; c++) dw[c] += (x[c] - m) * s * dy[c];
    }
    if (dinp) {
      FS_REAL *dx = dinp + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++)
        dx[c] += (w[c] * dy[c] - dnorm_mean - (x[c] - m) * s * dnorm_norm_mean) * s;
    }
  }
}

/* sqrt(2/pi) and 1/sqrt(2 pi) (C11's math.h has no M_ constants) */
#define SQRT_2_OVER_PI ((FS_REAL)0.79788456080286535588)
#define INV_SQRT_2PI ((FS_REAL)0.39894228040143267794)

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_act_forward)(fsN_act act, FS_REAL *out, const FS_REAL *inp, size_t n) {
  switch (act) {
  case FSN_RELU: /* a select, not a branch: the signs of activations are a coin toss */
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0 ? inp[i] : 0;
    break;
  case FSN_GELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      FS_REAL x = inp[i];
      out[i] = (FS_REAL)0.5 * x * FS_RONE_PLUS_ERF_SQRT1_2(x, FS_RVEXP(-(FS_REAL)0.5 * x * x));
    }
    break;
  case FSN_GELU_TANH:
    for (size_t i = 0; i < n; i++) {
      FS_REAL x = inp[i];
      out[i] = (FS_REAL)0.5 * x * ((FS_REAL)1 + FS_RM(tanh)(SQRT_2_OVER_PI * (x + (FS_REAL)0.044715 * x * x * x)));
    }
    break;
  case FSN_TANH:
    for (size_t i = 0; i < n; i++) out[i] = FS_RM(tanh)(inp[i]);
    break;
  case FSN_SIGMOID:
    for (size_t i = 0; i < n; i++) out[i] = (FS_REAL)1 / ((FS_REAL)1 + FS_RM(exp)(-inp[i]));
    break;
  case FSN_SILU:
    for (size_t i = 0; i < n; i++) out[i] = inp[i] / ((FS_REAL)1 + FS_RM(exp)(-inp[i]));
    break;
  }
}

FS_RPUB FS_VECTOR_TARGET void FS_RK(fsN_act_backward)(fsN_act act, FS_REAL *dinp, const FS_REAL *dout,
                                                      const FS_REAL *inp, const FS_REAL *out, size_t n) {
  switch (act) {
  case FSN_RELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) dinp[i] += inp[i] > 0 ? dout[i] : 0;
    break;
  case FSN_GELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      FS_REAL x = inp[i], pdf = FS_RVEXP(-(FS_REAL)0.5 * x * x);
      FS_REAL cdf = (FS_REAL)0.5 * FS_RONE_PLUS_ERF_SQRT1_2(x, pdf);
      dinp[i] += dout[i] * (cdf + x * INV_SQRT_2PI * pdf);
    }
    break;
  case FSN_GELU_TANH:
    for (size_t i = 0; i < n; i++) {
      FS_REAL x = inp[i];
      FS_REAL u = SQRT_2_OVER_PI * (x + (FS_REAL)0.044715 * x * x * x);
      FS_REAL t = FS_RM(tanh)(u), sech2 = (FS_REAL)1 - t * t;
      FS_REAL du = SQRT_2_OVER_PI * ((FS_REAL)1 + (FS_REAL)3 * (FS_REAL)0.044715 * x * x);
      dinp[i] += dout[i] * ((FS_REAL)0.5 * ((FS_REAL)1 + t) + (FS_REAL)0.5 * x * sech2 * du);
    }
    break;
  case FSN_TANH:
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * ((FS_REAL)1 - out[i] * out[i]);
    break;
  case FSN_SIGMOID:
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * out[i] * ((FS_REAL)1 - out[i]);
    break;
  case FSN_SILU:
    for (size_t i = 0; i < n; i++) {
      FS_REAL s = (FS_REAL)1 / ((FS_REAL)1 + FS_RM(exp)(-inp[i]));
      dinp[i] += dout[i] * s * ((FS_REAL)1 + inp[i] * ((FS_REAL)1 - s));
    }
    break;
  }
}

FS_RPUB FS_VECTOR_TARGET int FS_RK(fsN_attention_forward)(FS_REAL *out, FS_REAL *att, const FS_REAL *inp, int64_t B,
                                                          int64_t T, int64_t C, int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C;
  FS_REAL scale = (FS_REAL)1 / FS_RM(sqrt)((FS_REAL)hs);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++) {
      const FS_REAL *q = inp + b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
      FS_REAL *P = att + (b * NH + h) * T * T;
      if (FS_RGEMM(false, true, T, T, hs, scale, q, C3, k, C3, 0, P, T) < 0) return -1;
      for (int64_t t = 0; t < T; t++) { /* causal softmax of row t over t2 <= t */
        FS_REAL *row = P + t * T, mx = row[0], sum = 0;
#pragma omp simd reduction(max:mx)
        for (int64_t t2 = 1; t2 <= t; t2++) mx = row[t2] > mx ? row[t2] : mx;
#pragma omp simd reduction(+:sum)
        for (int64_t t2 = 0; t2 <= t; t2++) sum += row[t2] = FS_RVEXP(row[t2] - mx);
        FS_REAL inv = (FS_REAL)1 / sum;
#pragma omp simd
        for (int64_t t2 = 0; t2 <= t; t2++) row[t2] *= inv;
        for (int64_t t2 = t + 1; t2 < T; t2++) row[t2] = 0;
      }
      if (FS_RGEMM(false, false, T, hs, T, 1, P, T, v, C3, 0, out + b * T * C + h * hs, C) < 0)
        return -1;
    }
  return 0;
}

FS_RPUB FS_VECTOR_TARGET int FS_RK(fsN_attention_backward)(FS_REAL *dinp, const FS_REAL *dout, const FS_REAL *inp,
                                                           const FS_REAL *att, int64_t B, int64_t T, int64_t C,
                                                           int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C;
  FS_REAL scale = (FS_REAL)1 / FS_RM(sqrt)((FS_REAL)hs);
  FS_REAL *dS = malloc((size_t)(T > 0 ? T * T : 1) * sizeof *dS); /* dP, then dS in place */
  if (!dS) {
    fsT_seterr("out of memory");
    return -1;
  }
  int rc = 0;
  for (int64_t b = 0; !rc && b < B; b++)
    for (int64_t h = 0; !rc && h < NH; h++) {
      const FS_REAL *q = inp + b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
      FS_REAL *dq = dinp + b * T * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
      const FS_REAL *P = att + (b * NH + h) * T * T, *dy = dout + b * T * C + h * hs;
      if (FS_RGEMM(false, true, T, T, hs, 1, dy, C, v, C3, 0, dS, T) < 0 ||
          FS_RGEMM(true, false, T, hs, T, 1, P, T, dy, C, 1, dv, C3) < 0) {
        rc = -1;
        break;
      }
      for (int64_t t = 0; t < T; t++) { /* softmax backward; P is 0 above the diagonal */
        const FS_REAL *p = P + t * T;
        FS_REAL *d = dS + t * T, dot = 0;
#pragma omp simd reduction(+:dot)
        for (int64_t t2 = 0; t2 <= t; t2++) dot += p[t2] * d[t2];
#pragma omp simd
        for (int64_t t2 = 0; t2 < T; t2++) d[t2] = p[t2] * (d[t2] - dot) * scale;
      }
      if (FS_RGEMM(false, false, T, hs, T, 1, dS, T, k, C3, 1, dq, C3) < 0 ||
          FS_RGEMM(true, false, T, hs, T, 1, dS, T, q, C3, 1, dk, C3) < 0)
        rc = -1;
    }
  free(dS);
  return rc;
}

