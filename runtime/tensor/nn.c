/* nn.c -- cpu layer kernels (see nn.h for shapes and conventions); those
 * float64 shares are written once, over the element type, in nn_typed.h. */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "loss.h"
#include "rng.h"
#include "tensor.h"
#include "vmath.h"

/* linear, embeddings, layer norm, activations, dropout, attention: one
 * text with f64.c's float64 kernels */
#include "nn_typed.h"

/* The bfloat16 attention's (batch, head) pairs: nn_typed.h's float32
 * pairs (attention_pair) with q, k, v read as bfloat16 and the results
 * finished by the GEMMs (gemm_bf16.c's fsB_out): the output rounded to
 * bfloat16, q's, k's and v's gradients rounded into dinp.  Split across
 * threads when nn_typed.h splits the float32 heads; a pair writes only its
 * head's columns, so the bits do not depend on the thread count. */
typedef struct attention_bf16_job {
  uint16_t *out;
  float *att, *dinp, *dS, beta; /* dS: T x T scratch per worker; beta 0: dinp unset */
  const uint16_t *inp;
  const float *dout;
  int64_t T, C, NH;
} attention_bf16_job;

static int attention_bf16_pair(void *ctx, int i, int worker) {
  const attention_bf16_job *a = ctx;
  int64_t T = a->T, C = a->C, C3 = 3 * C, hs = C / a->NH, b = i / a->NH;
  const uint16_t *q = a->inp + b * T * C3 + (i % a->NH) * hs;
  float scale = 1.0f / sqrtf((float)hs), *probs = a->att + (int64_t)i * T * T;
  fsB_mat Q = {q, true, C3, false}, K = {q + C, true, C3, false}, V = {q + 2 * C, true, C3, false},
          P = {probs, false, T, false};
  int64_t ocol = b * T * C + (i % a->NH) * hs;
  if (!a->dinp) {
    if (fsB_gemm_bf16x(false, true, T, T, hs, scale, Q, K, 0.0f, probs, T) < 0) return -1;
    sdpa_softmax_rows(probs, T, T, true);
    return fsB_gemm_bf16o(false, false, T, hs, T, 1.0f, P, V, (fsB_out){FSB_BF16_BIAS, a->out + ocol, C, 0.0f, NULL});
  }
  float *dS = a->dS + (int64_t)worker * T * T, *dq = a->dinp + (q - a->inp);
  fsB_mat dY = {a->dout + ocol, false, C, false}, G = {dS, false, T, false};
  if (fsB_gemm_bf16x(false, true, T, T, hs, 1.0f, dY, V, 0.0f, dS, T) < 0 ||
      fsB_gemm_bf16o(true, false, T, hs, T, 1.0f, P, dY, (fsB_out){FSB_ROUNDED_SUM, dq + 2 * C, C3, a->beta, NULL}) < 0)
    return -1;
  sdpa_softmax_grad_rows(probs, dS, T, T, true, scale);
  if (fsB_gemm_bf16o(false, false, T, hs, T, 1.0f, G, K, (fsB_out){FSB_ROUNDED_SUM, dq, C3, a->beta, NULL}) < 0)
    return -1;
  return fsB_gemm_bf16o(true, false, T, hs, T, 1.0f, G, Q, (fsB_out){FSB_ROUNDED_SUM, dq + C, C3, a->beta, NULL});
}

static int attention_bf16_run(attention_bf16_job *a, int64_t B) {
  int64_t n = B * a->NH;
  if (n > INT32_MAX) {
    fsT_seterr("attention: %lld (batch, head) pairs are too many", (long long)n);
    return -1;
  }
  if (heads_split(a->T, a->C, a->NH)) return fsB_parallel((int)n, attention_bf16_pair, a);
  for (int i = 0; i < (int)n; i++)
    if (attention_bf16_pair(a, i, 0) < 0) return -1;
  return 0;
}

int fsN_attention_bf16_forward(uint16_t *out, float *att, const uint16_t *inp, int64_t B, int64_t T, int64_t C,
                               int64_t NH) {
  return attention_bf16_run(&(attention_bf16_job){out, att, NULL, NULL, 0.0f, inp, NULL, T, C, NH}, B);
}

int fsN_attention_bf16_backward(float *dinp, bool dinp_unset, const float *dout, const uint16_t *inp,
                                const float *att, int64_t B, int64_t T, int64_t C, int64_t NH) {
  size_t workers = heads_split(T, C, NH) ? (size_t)fsB_threads() : 1;
  float *dS = malloc(workers * (size_t)(T > 0 ? T * T : 1) * sizeof *dS);
  if (!dS) {
    fsT_seterr("out of memory");
    return -1;
  }
  int rc = attention_bf16_run(
      &(attention_bf16_job){NULL, (float *)att, dinp, dS, dinp_unset ? 0.0f : 1.0f, inp, dout, T, C, NH}, B);
  free(dS);
  return rc;
}

/* Layer norm over the worker pool (fsB_parallel): forward by parts of
 * LN_PART_FLOATS elements' worth of rows; backward's dinp by the same row
 * parts and dw, db by parts of LN_PART_COLUMNS columns, each summing its
 * columns over all rows in row order, as the one-thread kernel does.  Every
 * value is computed by the very expressions of nn_typed.h's kernel in the
 * same order, so the split (fixed by N and C alone) changes no bits.
 * Column parts take whole rows up to 512 columns (64-column strips ran at
 * 1.3x-2x the time). */
enum { LN_PART_FLOATS = 16384, LN_PART_COLUMNS = 512 };
typedef struct ln_job {
  float *out, *mean, *rstd, *dinp, *dw, *db;
  const float *inp, *w, *b, *dout;
  int64_t N, C, rows_per_part, row_parts;
  float eps;
} ln_job;

static int64_t ln_rows_per_part(int64_t C) { return C >= LN_PART_FLOATS ? 1 : LN_PART_FLOATS / C; }

static int ln_forward_part(void *ctx, int part, int worker) {
  (void)worker;
  const ln_job *j = ctx;
  int64_t r0 = part * j->rows_per_part, rows = j->N - r0 < j->rows_per_part ? j->N - r0 : j->rows_per_part;
  fsN_layernorm_forward(j->out + r0 * j->C, j->mean + r0, j->rstd + r0, j->inp + r0 * j->C, j->w, j->b, rows, j->C,
                        j->eps);
  return 0;
}

FS_VECTOR_TARGET
static void ln_param_columns(const ln_job *j, int64_t c0, int64_t c1) {
  for (int64_t n = 0; n < j->N; n++) {
    const float *x = j->inp + n * j->C, *dy = j->dout + n * j->C;
    float m = j->mean[n], s = j->rstd[n];
    if (j->db) {
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) j->db[c] += dy[c];
    }
    if (j->dw) {
#pragma omp simd
      for (int64_t c = c0; c < c1; c++) j->dw[c] += (x[c] - m) * s * dy[c];
    }
  }
}

static int ln_backward_part(void *ctx, int part, int worker) {
  (void)worker;
  const ln_job *j = ctx;
  if (part >= j->row_parts) {
    int64_t c0 = (int64_t)(part - j->row_parts) * LN_PART_COLUMNS;
    ln_param_columns(j, c0, j->C - c0 < LN_PART_COLUMNS ? j->C : c0 + LN_PART_COLUMNS);
    return 0;
  }
  int64_t r0 = part * j->rows_per_part, rows = j->N - r0 < j->rows_per_part ? j->N - r0 : j->rows_per_part;
  fsN_layernorm_backward(j->dinp + r0 * j->C, NULL, NULL, j->dout + r0 * j->C, j->inp + r0 * j->C, j->w, j->mean + r0,
                         j->rstd + r0, rows, j->C);
  return 0;
}

/* whether a layer norm of N x C is worth handing out, and in how many row parts */
static bool ln_split(int64_t N, int64_t C, int64_t *row_parts) {
  if (N <= 0 || C <= 0 || N * C < 2 * LN_PART_FLOATS) return false;
  int64_t per = ln_rows_per_part(C);
  *row_parts = (N + per - 1) / per;
  return *row_parts + (C + LN_PART_COLUMNS - 1) / LN_PART_COLUMNS < INT32_MAX;
}

static void layernorm_forward_split(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                    const float *b, int64_t N, int64_t C, float eps) {
  int64_t parts;
  if (!ln_split(N, C, &parts)) {
    fsN_layernorm_forward(out, mean, rstd, inp, w, b, N, C, eps);
    return;
  }
  ln_job j = {out, mean, rstd, NULL, NULL, NULL, inp, w, b, NULL, N, C, ln_rows_per_part(C), parts, eps};
  fsB_parallel((int)parts, ln_forward_part, &j); /* the parts cannot fail */
}

static void layernorm_backward_split(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                     const float *w, const float *mean, const float *rstd, int64_t N, int64_t C) {
  int64_t parts;
  if (!ln_split(N, C, &parts)) {
    fsN_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    return;
  }
  ln_job j = {NULL, (float *)mean, (float *)rstd, dinp, dw, db, inp, w, NULL, dout, N, C, ln_rows_per_part(C),
              dinp ? parts : 0, 0};
  int64_t cols = dw || db ? (C + LN_PART_COLUMNS - 1) / LN_PART_COLUMNS : 0;
  fsB_parallel((int)(j.row_parts + cols), ln_backward_part, &j);
}

/* Cross entropy over the worker pool, by parts of rows as layer norm's:
 * each row is computed as a one-row call (the backward's scale dloss / N
 * passed as a one-row call's dloss), the forward's row terms summed
 * afterwards in row order, so the split changes no bits. */
typedef struct ce_job {
  const float *logits;
  const int64_t *targets;
  float *dlogits, scale;
  double *terms;
  int64_t N, C, rows_per_part;
} ce_job;

static int ce_part(void *ctx, int part, int worker) {
  (void)worker;
  const ce_job *j = ctx;
  int64_t r = part * j->rows_per_part, end = j->N - r < j->rows_per_part ? j->N : r + j->rows_per_part;
  for (; r < end; r++)
    if (j->terms) j->terms[r] = fsN_cross_entropy_forward(j->logits + r * j->C, j->targets + r, 1, j->C);
    else fsN_cross_entropy_backward(j->dlogits + r * j->C, j->logits + r * j->C, j->targets + r, 1, j->C, j->scale);
  return 0;
}

static double cross_entropy_forward_split(const float *logits, const int64_t *targets, int64_t N, int64_t C) {
  int64_t parts;
  double *terms = ln_split(N, C, &parts) ? malloc((size_t)N * sizeof *terms) : NULL;
  if (!terms) return fsN_cross_entropy_forward(logits, targets, N, C); /* small, or no memory for the terms */
  fsB_parallel((int)parts, ce_part, &(ce_job){logits, targets, NULL, 0, terms, N, C, ln_rows_per_part(C)});
  double total = 0;
  for (int64_t n = 0; n < N; n++) total += terms[n];
  free(terms);
  return total / (double)N;
}

static void cross_entropy_backward_split(float *dlogits, const float *logits, const int64_t *targets, int64_t N,
                                         int64_t C, float dloss) {
  int64_t parts;
  if (!ln_split(N, C, &parts)) {
    fsN_cross_entropy_backward(dlogits, logits, targets, N, C, dloss);
    return;
  }
  fsB_parallel((int)parts, ce_part, &(ce_job){logits, targets, dlogits, dloss / (float)N, NULL, N, C, ln_rows_per_part(C)});
}

int fsN_act_low_table(fsN_act act, fs_dtype dt, uint16_t *out, float *slope) {
  enum { U = 65536 };
  float *wide = malloc(3 * U * sizeof *wide);
  if (!wide) {
    fsT_seterr("out of memory");
    return -1;
  }
  float *y = wide + U, *ones = y + U;
  for (uint32_t u = 0; u < U; u++) {
    uint16_t h = (uint16_t)u;
    fsT_convert(FS_F32, wide + u, dt, &h, 1);
    ones[u] = 1.0f;
    slope[u] = -0.0f; /* -0 + f is f, signed zeros included */
  }
  fsN_act_forward(act, y, wide, U);
  fsN_act_backward(act, slope, ones, wide, y, U); /* tanh's reads its float32 result, as the widened path's */
  fsT_convert(dt, out, FS_F32, y, U);
  free(wide);
  return 0;
}

const fsN_kernels fsN_cpu = {
  fsN_linear_forward, fsN_linear_backward,
  fsN_embedding_forward, fsN_embedding_backward,
  fsN_posemb_forward, fsN_posemb_backward,
  layernorm_forward_split, layernorm_backward_split,
  fsN_act_forward, fsN_act_backward,
  fsN_dropout_forward, fsN_dropout_backward,
  fsN_attention_forward, fsN_attention_backward,
  cross_entropy_forward_split, cross_entropy_backward_split,
  fsN_mse_forward, fsN_mse_backward,
};
