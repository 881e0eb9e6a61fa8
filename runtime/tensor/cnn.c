/* cnn.c -- cpu kernels of the convolutional layers (cnn.h gives the shapes
 * and conventions).  Convolutions are im2col + the sgemm of blas.h, one GEMM
 * per image and group, so they run at the BLAS's speed. */
#include "cnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "tensor.h"
#include "vmath.h"

/* col[Cg*KH*KW, OH*OW] = the windows of one group's channels x[Cg,H,W] */
static void im2col(float *col, const float *x, int64_t Cg, const fsN_conv *g) {
  int64_t P = g->OH * g->OW;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        float *row = col + ((c * g->KH + kh) * g->KW + kw) * P;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t h = oh * g->sh - g->ph + kh * g->dh;
          float *dst = row + oh * g->OW;
          if (h < 0 || h >= g->H) {
            memset(dst, 0, (size_t)g->OW * sizeof *dst);
            continue;
          }
          const float *src = x + (c * g->H + h) * g->W;
          for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t w = ow * g->sw - g->pw + kw * g->dw;
            dst[ow] = w >= 0 && w < g->W ? src[w] : 0.0f;
          }
        }
      }
}

/* dx[Cg,H,W] += the windows of col (im2col's adjoint) */
static void col2im(float *dx, const float *col, int64_t Cg, const fsN_conv *g) {
  int64_t P = g->OH * g->OW;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        const float *row = col + ((c * g->KH + kh) * g->KW + kw) * P;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t h = oh * g->sh - g->ph + kh * g->dh;
          if (h < 0 || h >= g->H) continue;
          float *dst = dx + (c * g->H + h) * g->W;
          const float *src = row + oh * g->OW;
          for (int64_t ow = 0; ow < g->OW; ow++) {
            int64_t w = ow * g->sw - g->pw + kw * g->dw;
            if (w >= 0 && w < g->W) dst[w] += src[ow];
          }
        }
      }
}

/* A 1x1 convolution without stride or padding needs no im2col: the image
 * itself is the column matrix. */
static bool pointwise(const fsN_conv *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static float *col_buffer(const fsN_conv *g) {
  size_t n = (size_t)(g->C / g->G * g->KH * g->KW * g->OH * g->OW);
  float *col = malloc((n ? n : 1) * sizeof *col);
  if (!col) fsT_seterr("out of memory (conv2d column buffer of %zu floats)", n);
  return col;
}

int fsN_conv2d_forward(float *out, const float *x, const float *W, const float *b, const fsN_conv *g) {
  int64_t Cg = g->C / g->G, OCg = g->OC / g->G, P = g->OH * g->OW, K = Cg * g->KH * g->KW;
  bool direct = pointwise(g);
  float *col = direct ? NULL : col_buffer(g);
  if (!direct && !col) return -1;
  int rc = 0;
  for (int64_t n = 0; !rc && n < g->N; n++)
    for (int64_t gr = 0; !rc && gr < g->G; gr++) {
      const float *xg = x + (n * g->C + gr * Cg) * g->H * g->W;
      float *og = out + (n * g->OC + gr * OCg) * P;
      if (b)
        for (int64_t o = 0; o < OCg; o++)
          for (int64_t p = 0; p < P; p++) og[o * P + p] = b[gr * OCg + o];
      if (!direct) im2col(col, xg, Cg, g);
      rc = fsB_sgemm(false, false, OCg, P, K, 1.0f, W + gr * OCg * K, K, direct ? xg : col, P,
                     b ? 1.0f : 0.0f, og, P);
    }
  free(col);
  return rc;
}

int fsN_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x,
                        const float *W, const fsN_conv *g) {
  int64_t Cg = g->C / g->G, OCg = g->OC / g->G, P = g->OH * g->OW, K = Cg * g->KH * g->KW;
  bool direct = pointwise(g);
  float *col = direct ? NULL : col_buffer(g);
  if (!direct && !col) return -1;
  int rc = 0;
  for (int64_t n = 0; !rc && n < g->N; n++)
    for (int64_t gr = 0; !rc && gr < g->G; gr++) {
      const float *xg = x + (n * g->C + gr * Cg) * g->H * g->W;
      const float *dy = dout + (n * g->OC + gr * OCg) * P, *Wg = W + gr * OCg * K;
      if (db)
        for (int64_t o = 0; o < OCg; o++) {
          double s = 0;
          for (int64_t p = 0; p < P; p++) s += dy[o * P + p];
          db[gr * OCg + o] += (float)s;
        }
      if (dW) {
        if (!direct) im2col(col, xg, Cg, g);
        rc = fsB_sgemm(false, true, OCg, K, P, 1.0f, dy, P, direct ? xg : col, P, 1.0f, dW + gr * OCg * K, K);
      }
      if (!rc && dx) {
        float *dxg = dx + (n * g->C + gr * Cg) * g->H * g->W;
        if (direct) rc = fsB_sgemm(true, false, K, P, OCg, 1.0f, Wg, K, dy, P, 1.0f, dxg, P);
        else if (!(rc = fsB_sgemm(true, false, K, P, OCg, 1.0f, Wg, K, dy, P, 0.0f, col, P)))
          col2im(dxg, col, Cg, g);
      }
    }
  free(col);
  return rc;
}

void fsN_maxpool2d_forward(float *out, int64_t *idx, const float *x, const fsN_conv *g) {
  for (int64_t nc = 0; nc < g->N * g->C; nc++) {
    const float *xp = x + nc * g->H * g->W;
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ow = 0; ow < g->OW; ow++) {
        float best = -INFINITY;
        int64_t at = -1;
        for (int64_t kh = 0; kh < g->KH; kh++) {
          int64_t h = oh * g->sh - g->ph + kh * g->dh;
          if (h < 0 || h >= g->H) continue;
          for (int64_t kw = 0; kw < g->KW; kw++) {
            int64_t w = ow * g->sw - g->pw + kw * g->dw;
            if (w < 0 || w >= g->W) continue;
            float v = xp[h * g->W + w];
            if (at < 0 || v > best || (isnan(v) && !isnan(best))) {
              best = v;
              at = h * g->W + w;
            }
          }
        }
        int64_t o = (nc * g->OH + oh) * g->OW + ow;
        out[o] = best;
        idx[o] = at;
      }
  }
}

void fsN_maxpool2d_backward(float *dx, const float *dout, const int64_t *idx, const fsN_conv *g) {
  int64_t P = g->OH * g->OW;
  for (int64_t nc = 0; nc < g->N * g->C; nc++)
    for (int64_t p = 0; p < P; p++)
      if (idx[nc * P + p] >= 0) dx[nc * g->H * g->W + idx[nc * P + p]] += dout[nc * P + p];
}

void fsN_avgpool2d_forward(float *out, const float *x, int64_t NC, const fsN_avgwin *w) {
  for (int64_t nc = 0; nc < NC; nc++) {
    const float *xp = x + nc * w->H * w->W;
    for (int64_t oh = 0; oh < w->OH; oh++)
      for (int64_t ow = 0; ow < w->OW; ow++) {
        float s = 0;
        for (int64_t h = w->hs[oh]; h < w->he[oh]; h++)
          for (int64_t c = w->ws[ow]; c < w->we[ow]; c++) s += xp[h * w->W + c];
        out[(nc * w->OH + oh) * w->OW + ow] = s / (float)(w->hdiv[oh] * w->wdiv[ow]);
      }
  }
}

void fsN_avgpool2d_backward(float *dx, const float *dout, int64_t NC, const fsN_avgwin *w) {
  for (int64_t nc = 0; nc < NC; nc++) {
    float *dp = dx + nc * w->H * w->W;
    for (int64_t oh = 0; oh < w->OH; oh++)
      for (int64_t ow = 0; ow < w->OW; ow++) {
        float g = dout[(nc * w->OH + oh) * w->OW + ow] / (float)(w->hdiv[oh] * w->wdiv[ow]);
        for (int64_t h = w->hs[oh]; h < w->he[oh]; h++)
          for (int64_t c = w->ws[ow]; c < w->we[ow]; c++) dp[h * w->W + c] += g;
      }
  }
}

FS_VECTOR_TARGET
void fsN_batchnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, float *rm, float *rv, int64_t N, int64_t C, int64_t S,
                           bool training, float momentum, float eps) {
  int64_t M = N * S;
  for (int64_t c = 0; c < C; c++) {
    float m, r;
    if (training) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; n++) {
        const float *xp = x + (n * C + c) * S;
        for (int64_t i = 0; i < S; i++) s += xp[i];
      }
      double mu = s / (double)M;
      for (int64_t n = 0; n < N; n++) {
        const float *xp = x + (n * C + c) * S;
        for (int64_t i = 0; i < S; i++) ss += (xp[i] - mu) * (xp[i] - mu);
      }
      double var = ss / (double)M;
      m = (float)mu;
      r = (float)(1.0 / sqrt(var + eps));
      if (rm) rm[c] = (1 - momentum) * rm[c] + momentum * m;
      if (rv) rv[c] = (1 - momentum) * rv[c] + momentum * (float)(M > 1 ? ss / (double)(M - 1) : var);
    } else {
      m = rm[c];
      r = 1.0f / sqrtf(rv[c] + eps);
    }
    mean[c] = m;
    rstd[c] = r;
    float sc = r * (w ? w[c] : 1.0f), sh = (b ? b[c] : 0.0f) - m * sc;
    for (int64_t n = 0; n < N; n++) {
      const float *xp = x + (n * C + c) * S;
      float *op = out + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; i++) op[i] = xp[i] * sc + sh;
    }
  }
}

FS_VECTOR_TARGET
void fsN_batchnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N,
                            int64_t C, int64_t S, bool training) {
  int64_t M = N * S;
  for (int64_t c = 0; c < C; c++) {
    float m = mean[c], r = rstd[c], wc = w ? w[c] : 1.0f;
    double sdy = 0, sdyxh = 0;
    for (int64_t n = 0; n < N; n++) {
      const float *xp = x + (n * C + c) * S, *dy = dout + (n * C + c) * S;
      for (int64_t i = 0; i < S; i++) {
        sdy += dy[i];
        sdyxh += dy[i] * (xp[i] - m) * r;
      }
    }
    if (dw) dw[c] += (float)sdyxh;
    if (db) db[c] += (float)sdy;
    if (!dx) continue;
    /* training: dx = w r (dy - mean(dy) - xh mean(dy xh)) */
    float a = training ? (float)(sdy / (double)M) : 0.0f, k = training ? (float)(sdyxh / (double)M) : 0.0f;
    for (int64_t n = 0; n < N; n++) {
      const float *xp = x + (n * C + c) * S, *dy = dout + (n * C + c) * S;
      float *dp = dx + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; i++) dp[i] += wc * r * (dy[i] - a - (xp[i] - m) * r * k);
    }
  }
}
