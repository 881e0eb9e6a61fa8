/* nn.c -- cpu layer kernels (see nn.h for shapes and conventions). */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "loss.h"
#include "rng.h"
#include "tensor.h"
#include "vmath.h"

int fsN_linear_forward(float *out, const float *inp, const float *W, const float *b,
                       int64_t N, int64_t C, int64_t OC) {
  if (b)
    for (int64_t n = 0; n < N; n++) memcpy(out + n * OC, b, (size_t)OC * sizeof *b);
  return fsB_sgemm(false, true, N, OC, C, 1.0f, inp, C, W, C, b ? 1.0f : 0.0f, out, OC);
}

FS_VECTOR_TARGET
int fsN_linear_backward(float *dinp, float *dW, float *db, const float *dout,
                        const float *inp, const float *W, int64_t N, int64_t C, int64_t OC) {
  if (dinp && fsB_sgemm(false, false, N, C, OC, 1.0f, dout, OC, W, C, 1.0f, dinp, C) < 0)
    return -1;
  if (dW && fsB_sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dW, C) < 0)
    return -1;
  if (db)
    for (int64_t n = 0; n < N; n++) {
      const float *row = dout + n * OC;
#pragma omp simd
      for (int64_t o = 0; o < OC; o++) db[o] += row[o];
    }
  return 0;
}

void fsN_embedding_forward(float *out, const int64_t *idx, const float *W, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; n++) memcpy(out + n * D, W + idx[n] * D, (size_t)D * sizeof *W);
}

void fsN_embedding_backward(float *dW, const float *dout, const int64_t *idx, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; n++) {
    float *row = dW + idx[n] * D;
    for (int64_t d = 0; d < D; d++) row[d] += dout[n * D + d];
  }
}

void fsN_posemb_forward(float *out, const float *inp, const float *W, int64_t B, int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * D; i++) out[b * T * D + i] = inp[b * T * D + i] + W[i];
}

void fsN_posemb_backward(float *dinp, float *dW, const float *dout, int64_t B, int64_t T, int64_t D) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * D; i++) {
      float g = dout[b * T * D + i];
      if (dinp) dinp[b * T * D + i] += g;
      if (dW) dW[i] += g;
    }
}

FS_VECTOR_TARGET
void fsN_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *w, const float *b, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; n++) {
    const float *x = inp + n * C;
    float *y = out + n * C;
    float m = 0, v = 0;
#pragma omp simd reduction(+:m)
    for (int64_t c = 0; c < C; c++) m += x[c];
    m /= (float)C;
#pragma omp simd reduction(+:v)
    for (int64_t c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float s = 1.0f / sqrtf(v / (float)C + eps); /* biased variance, as torch */
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

FS_VECTOR_TARGET
void fsN_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, const float *mean,
                            const float *rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const float *x = inp + n * C, *dy = dout + n * C;
    float m = mean[n], s = rstd[n];
    float dnorm_mean = 0, dnorm_norm_mean = 0;
#pragma omp simd reduction(+:dnorm_mean, dnorm_norm_mean)
    for (int64_t c = 0; c < C; c++) {
      float norm = (x[c] - m) * s, dnorm = w[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
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
      float *dx = dinp + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++)
        dx[c] += (w[c] * dy[c] - dnorm_mean - (x[c] - m) * s * dnorm_norm_mean) * s;
    }
  }
}

#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2PI 0.3989422804014327f

FS_VECTOR_TARGET
void fsN_act_forward(fsN_act act, float *out, const float *inp, size_t n) {
  switch (act) {
  case FSN_RELU: /* a select, not a branch: the signs of activations are a coin toss */
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0 ? inp[i] : 0;
    break;
  case FSN_GELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      float x = inp[i];
      out[i] = 0.5f * x * fsVM_one_plus_erf_sqrt1_2(x, fsVM_expf(-0.5f * x * x));
    }
    break;
  case FSN_GELU_TANH:
    for (size_t i = 0; i < n; i++) {
      float x = inp[i];
      out[i] = 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
    }
    break;
  case FSN_TANH:
    for (size_t i = 0; i < n; i++) out[i] = tanhf(inp[i]);
    break;
  case FSN_SIGMOID: /* fsVM_expf, not libm's opaque call: the loop vectorizes */
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + fsVM_expf(-inp[i]));
    break;
  case FSN_SILU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] / (1.0f + fsVM_expf(-inp[i]));
    break;
  }
}

FS_VECTOR_TARGET
void fsN_act_backward(fsN_act act, float *dinp, const float *dout, const float *inp,
                      const float *out, size_t n) {
  switch (act) {
  case FSN_RELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) dinp[i] += inp[i] > 0 ? dout[i] : 0;
    break;
  case FSN_GELU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      float x = inp[i], pdf = fsVM_expf(-0.5f * x * x);
      float cdf = 0.5f * fsVM_one_plus_erf_sqrt1_2(x, pdf);
      dinp[i] += dout[i] * (cdf + x * INV_SQRT_2PI * pdf);
    }
    break;
  case FSN_GELU_TANH:
    for (size_t i = 0; i < n; i++) {
      float x = inp[i];
      float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
      float t = tanhf(u), sech2 = 1.0f - t * t;
      float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
      dinp[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * x * sech2 * du);
    }
    break;
  case FSN_TANH:
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * (1.0f - out[i] * out[i]);
    break;
  case FSN_SIGMOID:
#pragma omp simd
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * out[i] * (1.0f - out[i]);
    break;
  case FSN_SILU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      float s = 1.0f / (1.0f + fsVM_expf(-inp[i]));
      dinp[i] += dout[i] * s * (1.0f + inp[i] * (1.0f - s));
    }
    break;
  }
}

/* p == 1 drops everything (torch returns zeros, not nan). */
static float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

void fsN_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t key) {
  float s = dropout_scale(p);
  for (size_t i = 0; i < n; i++) out[i] = fsR_u01(key, i) >= p ? inp[i] * s : 0.0f;
}

void fsN_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t key) {
  float s = dropout_scale(p);
  for (size_t i = 0; i < n; i++)
    if (fsR_u01(key, i) >= p) dinp[i] += dout[i] * s;
}

FS_VECTOR_TARGET
int fsN_sdpa_head_forward(const fsN_head *h, float *P, float *out, int64_t ldo) {
  int64_t L = h->L, S = h->S;
  if (fsB_sgemm(false, true, L, S, h->E, h->scale, h->q, h->ldq, h->k, h->ldk, 0.0f, P, S) < 0) return -1;
  for (int64_t i = 0; i < L; i++) { /* the softmax of row i over keys j <= last */
    int64_t last = h->causal && i < S ? i : S - 1;
    float *row = P + i * S, mx = row[0], sum = 0;
#pragma omp simd reduction(max:mx)
    for (int64_t j = 1; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
#pragma omp simd reduction(+:sum)
    for (int64_t j = 0; j <= last; j++) sum += row[j] = fsVM_expf(row[j] - mx);
    float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j <= last; j++) row[j] *= inv;
    for (int64_t j = last + 1; j < S; j++) row[j] = 0;
  }
  return fsB_sgemm(false, false, L, h->Ev, S, 1.0f, P, S, h->v, h->ldv, 0.0f, out, ldo);
}

FS_VECTOR_TARGET
int fsN_sdpa_head_backward(const fsN_head *h, const float *P, const float *dout, int64_t lddo, float *dS,
                           float *dq, float *dk, float *dv) {
  int64_t L = h->L, S = h->S, E = h->E;
  if (fsB_sgemm(false, true, L, S, h->Ev, 1.0f, dout, lddo, h->v, h->ldv, 0.0f, dS, S) < 0 ||
      (dv && fsB_sgemm(true, false, S, h->Ev, L, 1.0f, P, S, dout, lddo, 1.0f, dv, h->ldv) < 0))
    return -1;
  for (int64_t i = 0; i < L; i++) { /* softmax backward; P is 0 past the last key */
    int64_t last = h->causal && i < S ? i : S - 1;
    const float *p = P + i * S;
    float *d = dS + i * S, dot = 0;
#pragma omp simd reduction(+:dot)
    for (int64_t j = 0; j <= last; j++) dot += p[j] * d[j];
#pragma omp simd
    for (int64_t j = 0; j <= last; j++) d[j] = p[j] * (d[j] - dot) * h->scale;
    for (int64_t j = last + 1; j < S; j++) d[j] = 0;
  }
  if (dq && fsB_sgemm(false, false, L, E, S, 1.0f, dS, S, h->k, h->ldk, 1.0f, dq, h->ldq) < 0) return -1;
  return dk ? fsB_sgemm(true, false, S, E, L, 1.0f, dS, S, h->q, h->ldq, 1.0f, dk, h->ldk) : 0;
}

/* head h of batch b in the packed inp[B,T,3C]: q, k, v at column offsets 0, C, 2C */
static fsN_head packed_head(const float *inp, int64_t b, int64_t h, int64_t T, int64_t C, int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C;
  const float *q = inp + b * T * C3 + h * hs;
  return (fsN_head){q, q + C, q + 2 * C, C3, C3, C3, T, T, hs, hs, 1.0f / sqrtf((float)hs), true};
}

int fsN_attention_forward(float *out, float *att, const float *inp,
                          int64_t B, int64_t T, int64_t C, int64_t NH) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++) {
      fsN_head hd = packed_head(inp, b, h, T, C, NH);
      if (fsN_sdpa_head_forward(&hd, att + (b * NH + h) * T * T, out + b * T * C + h * hd.E, C) < 0) return -1;
    }
  return 0;
}

int fsN_attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                           int64_t B, int64_t T, int64_t C, int64_t NH) {
  float *dS = malloc((size_t)(T > 0 ? T * T : 1) * sizeof *dS);
  if (!dS) {
    fsT_seterr("out of memory");
    return -1;
  }
  int rc = 0;
  for (int64_t b = 0; !rc && b < B; b++)
    for (int64_t h = 0; !rc && h < NH; h++) {
      fsN_head hd = packed_head(inp, b, h, T, C, NH);
      float *dq = dinp + (hd.q - inp), *dk = dinp + (hd.k - inp), *dv = dinp + (hd.v - inp);
      rc = fsN_sdpa_head_backward(&hd, att + (b * NH + h) * T * T, dout + b * T * C + h * hd.E, C, dS, dq, dk, dv);
    }
  free(dS);
  return rc;
}

const fsN_kernels fsN_cpu = {
  fsN_linear_forward, fsN_linear_backward,
  fsN_embedding_forward, fsN_embedding_backward,
  fsN_posemb_forward, fsN_posemb_backward,
  fsN_layernorm_forward, fsN_layernorm_backward,
  fsN_act_forward, fsN_act_backward,
  fsN_dropout_forward, fsN_dropout_backward,
  fsN_attention_forward, fsN_attention_backward,
  fsN_cross_entropy_forward, fsN_cross_entropy_backward,
  fsN_mse_forward, fsN_mse_backward,
};
