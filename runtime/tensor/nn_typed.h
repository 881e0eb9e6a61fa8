/* nn_typed.h -- nn.c's layer kernels over FS_REAL (typed.h): linear,
 * embedding, positional embedding, layer norm, activations, dropout and
 * fused causal attention, forward and backward (nn.h gives shapes and conventions).
 * nn.c instantiates them for float as the fsN_ kernels themselves; f64_kernels.c
 * for double (static fsN_NAME_f64), the GPT's float64 path.
 *
 * Invariant: one text serves both types (the float32 kernels' formulas,
 * loop order and vectorization); only what typed.h maps differs: libm's
 * float or double names, vmath.h's vectorized exp and erf for float where
 * double takes libm's, sgemm or dgemm.  Included once per translation unit,
 * after nn.h. */
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "typed.h"
#include "rng_mix.h"
#include "tensor.h"

/* Inverted dropout: element i kept iff u(key, i) >= p (the same mask for
 * both types), scaled by 1/(1-p) in the element type; p == 1 drops
 * everything (torch returns zeros, not nan). */
static FS_REAL FS_RK(dropout_scale)(FS_REAL p) { return p < 1 ? 1 / (1 - p) : 0; }

FS_RPUB void FS_RK(fsN_dropout_forward)(FS_REAL *out, const FS_REAL *inp, size_t n, FS_REAL p, uint64_t key) {
  FS_REAL s = FS_RK(dropout_scale)(p);
  for (size_t i = 0; i < n; i++) out[i] = fsR_u01(key, i) >= p ? inp[i] * s : 0;
}

FS_RPUB void FS_RK(fsN_dropout_backward)(FS_REAL *dinp, const FS_REAL *dout, size_t n, FS_REAL p, uint64_t key) {
  FS_REAL s = FS_RK(dropout_scale)(p);
  for (size_t i = 0; i < n; i++)
    if (fsR_u01(key, i) >= p) dinp[i] += dout[i] * s;
}

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
  case FSN_SIGMOID: /* FS_RVEXP, not libm's opaque call: the loop vectorizes */
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = (FS_REAL)1 / ((FS_REAL)1 + FS_RVEXP(-inp[i]));
    break;
  case FSN_SILU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] / ((FS_REAL)1 + FS_RVEXP(-inp[i]));
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
#pragma omp simd
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * out[i] * ((FS_REAL)1 - out[i]);
    break;
  case FSN_SILU:
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
      FS_REAL s = (FS_REAL)1 / ((FS_REAL)1 + FS_RVEXP(-inp[i]));
      dinp[i] += dout[i] * s * ((FS_REAL)1 + inp[i] * ((FS_REAL)1 - s));
    }
    break;
  }
}

#if defined(FS_REAL_DOUBLE) && FS_REAL_DOUBLE
/* nn.h's fsN_head over double: one head of the GPT's float64 attention */
typedef struct fsN_head_f64 {
  FSN_HEAD_FIELDS(double)
} fsN_head_f64;
#endif

/* P [L, S] := the softmax of each row i over keys j <= last (0 past it):
 * a head's probabilities from its scores (also nn.c's bfloat16 heads).
 * float32's exps run on whole vectors of SOFTMAX_PAD past the last key
 * (the scores there are overwritten, then zeroed): a causal row's last
 * (last + 1) % 8 exps ran as scalar code, half the softmax's time.  Each
 * exp is the same whichever code computes it, and the sum is unchanged.
 * (float64's exp is libm's, whose vector form may differ.) */
enum { SOFTMAX_PAD = 8 };
static FS_VECTOR_TARGET void FS_RK(sdpa_softmax_rows)(FS_REAL *P, int64_t L, int64_t S, bool causal) {
  for (int64_t i = 0; i < L; i++) {
    int64_t last = causal && i < S ? i : S - 1;
    FS_REAL *row = P + i * S, mx = row[0], sum = 0;
#pragma omp simd reduction(max:mx)
    for (int64_t j = 1; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
#if defined(FS_REAL_DOUBLE) && FS_REAL_DOUBLE
#pragma omp simd reduction(+:sum)
    for (int64_t j = 0; j <= last; j++) sum += row[j] = FS_RVEXP(row[j] - mx);
#else
    int64_t end = (last + SOFTMAX_PAD) / SOFTMAX_PAD * SOFTMAX_PAD;
    end = end < S ? end : S;
#pragma omp simd
    for (int64_t j = 0; j < end; j++) row[j] = FS_RVEXP(row[j] - mx);
#pragma omp simd reduction(+:sum)
    for (int64_t j = 0; j <= last; j++) sum += row[j];
#endif
    FS_REAL inv = (FS_REAL)1 / sum;
#pragma omp simd
    for (int64_t j = 0; j <= last; j++) row[j] *= inv;
    for (int64_t j = last + 1; j < S; j++) row[j] = 0;
  }
}

/* dS [L, S] := the scores' gradient from the probabilities' (softmax
 * backward, times the scale); P is 0 past the last key */
static FS_VECTOR_TARGET void FS_RK(sdpa_softmax_grad_rows)(const FS_REAL *P, FS_REAL *dS, int64_t L, int64_t S,
                                                          bool causal, FS_REAL scale) {
  for (int64_t i = 0; i < L; i++) {
    int64_t last = causal && i < S ? i : S - 1;
    const FS_REAL *p = P + i * S;
    FS_REAL *d = dS + i * S, dot = 0;
#pragma omp simd reduction(+:dot)
    for (int64_t j = 0; j <= last; j++) dot += p[j] * d[j];
#pragma omp simd
    for (int64_t j = 0; j <= last; j++) d[j] = p[j] * (d[j] - dot) * scale;
    for (int64_t j = last + 1; j < S; j++) d[j] = 0;
  }
}

FS_RPUB int FS_RK(fsN_sdpa_head_forward)(const FS_RK(fsN_head) *h, FS_REAL *P, FS_REAL *out, int64_t ldo) {
  int64_t L = h->L, S = h->S;
  if (FS_RGEMM(false, true, L, S, h->E, h->scale, h->q, h->ldq, h->k, h->ldk, 0, P, S) < 0) return -1;
  FS_RK(sdpa_softmax_rows)(P, L, S, h->causal);
  return FS_RGEMM(false, false, L, h->Ev, S, 1, P, S, h->v, h->ldv, 0, out, ldo);
}

FS_RPUB int FS_RK(fsN_sdpa_head_backward)(const FS_RK(fsN_head) *h, const FS_REAL *P, const FS_REAL *dout,
                                          int64_t lddo, FS_REAL *dS, FS_REAL *dq, FS_REAL *dk, FS_REAL *dv) {
  int64_t L = h->L, S = h->S, E = h->E;
  if (FS_RGEMM(false, true, L, S, h->Ev, 1, dout, lddo, h->v, h->ldv, 0, dS, S) < 0 ||
      (dv && FS_RGEMM(true, false, S, h->Ev, L, 1, P, S, dout, lddo, 1, dv, h->ldv) < 0))
    return -1;
  FS_RK(sdpa_softmax_grad_rows)(P, dS, L, S, h->causal, h->scale);
  if (dq && FS_RGEMM(false, false, L, E, S, 1, dS, S, h->k, h->ldk, 1, dq, h->ldq) < 0) return -1;
  return dk ? FS_RGEMM(true, false, S, E, L, 1, dS, S, h->q, h->ldq, 1, dk, h->ldk) : 0;
}

/* head h of batch b in the packed inp[B,T,3C]: q, k, v at column offsets 0, C, 2C */
static FS_RK(fsN_head) FS_RK(packed_head)(const FS_REAL *inp, int64_t b, int64_t h, int64_t T, int64_t C,
                                          int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C;
  const FS_REAL *q = inp + b * T * C3 + h * hs;
  return (FS_RK(fsN_head)){q, q + C, q + 2 * C, C3, C3, C3, T, T, hs, hs, (FS_REAL)1 / FS_RM(sqrt)((FS_REAL)hs), true};
}

/* The (batch, head) pairs of the fused attention, forward (dinp NULL) or
 * backward.  A head's products (T x T x hs: 64 x 64 x 32 in the GPT) are
 * too small for OpenBLAS or gemm_bf16.c to split across threads, so with
 * several threads the pairs are split instead: a part is one pair, writing
 * only its own head's columns of out (dinp) and its own att block, so the
 * bits are the same whichever thread runs it and however many there are.
 * Larger heads run on this thread and split their products. */
typedef struct FS_RK(attention_job) {
  FS_REAL *out, *att, *dinp, *dS; /* dS: T x T scratch per worker (backward) */
  const FS_REAL *inp, *dout;
  int64_t T, C, NH;
} FS_RK(attention_job);

static int FS_RK(attention_pair)(void *ctx, int i, int worker) {
  const FS_RK(attention_job) *a = ctx;
  int64_t b = i / a->NH, T = a->T, C = a->C;
  FS_RK(fsN_head) hd = FS_RK(packed_head)(a->inp, b, i % a->NH, T, C, a->NH);
  FS_REAL *P = a->att + (int64_t)i * T * T;
  int64_t col = hd.q - a->inp, ocol = b * T * C + (i % a->NH) * hd.E;
  if (!a->dinp) return FS_RK(fsN_sdpa_head_forward)(&hd, P, a->out + ocol, C);
  FS_REAL *dq = a->dinp + col;
  return FS_RK(fsN_sdpa_head_backward)(&hd, P, a->dout + ocol, C, a->dS + (int64_t)worker * T * T, dq, dq + C,
                                       dq + 2 * C);
}

/* under OpenBLAS's threshold for threading a product (M N K of 65536 x 4) */
static bool FS_RK(heads_split)(int64_t T, int64_t C, int64_t NH) {
  return fsB_threads() > 1 && (double)T * (double)T * (double)(C / NH) < 262144.0;
}

static int FS_RK(attention_run)(FS_RK(attention_job) *a, int64_t B) {
  int64_t n = B * a->NH;
  if (n > INT32_MAX) {
    fsT_seterr("attention: %lld (batch, head) pairs are too many", (long long)n);
    return -1;
  }
  if (FS_RK(heads_split)(a->T, a->C, a->NH)) return fsB_parallel((int)n, FS_RK(attention_pair), a);
  for (int i = 0; i < (int)n; i++)
    if (FS_RK(attention_pair)(a, i, 0) < 0) return -1;
  return 0;
}

FS_RPUB int FS_RK(fsN_attention_forward)(FS_REAL *out, FS_REAL *att, const FS_REAL *inp, int64_t B, int64_t T,
                                         int64_t C, int64_t NH) {
  return FS_RK(attention_run)(&(FS_RK(attention_job)){out, att, NULL, NULL, inp, NULL, T, C, NH}, B);
}

FS_RPUB int FS_RK(fsN_attention_backward)(FS_REAL *dinp, const FS_REAL *dout, const FS_REAL *inp,
                                          const FS_REAL *att, int64_t B, int64_t T, int64_t C, int64_t NH) {
  size_t workers = FS_RK(heads_split)(T, C, NH) ? (size_t)fsB_threads() : 1;
  FS_REAL *dS = malloc(workers * (size_t)(T > 0 ? T * T : 1) * sizeof *dS);
  if (!dS) {
    fsT_seterr("out of memory");
    return -1;
  }
  int rc = FS_RK(attention_run)(&(FS_RK(attention_job)){NULL, (FS_REAL *)att, dinp, dS, inp, dout, T, C, NH}, B);
  free(dS);
  return rc;
}
