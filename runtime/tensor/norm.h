/* norm.h -- GroupNorm's and RMSNorm's kernels as forward/backward pairs on
 * contiguous float arrays, in nn.h's conventions (backward ACCUMULATES,
 * NULL gradient = not needed).  cpu only: their entry points (norm_grad.c)
 * stage other devices' tensors through host memory, as cnn.h's do.
 *
 * Letters: N batch, C channels, S the product of the spatial dims, G groups
 * (C % G == 0, Cg = C / G); M rows, D the normalized size. */
#ifndef FS_NORM_H
#define FS_NORM_H

#include <stdint.h>

/* x[N,C,S]: per (n, g) over its Cg*S values, mean[N*G], rstd[N*G] =
 * 1/sqrt(var + eps) (biased); out = (x - mean) rstd w[c] + b[c]
 * (w, b NULL: 1 and 0) */
void fsN_groupnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int64_t N, int64_t C, int64_t S, int64_t G, float eps);
/* dx += rstd (dxh - mean(dxh) - xh mean(dxh xh)) over each group, dxh = dy w[c];
 * dw[c] += sum dy xh;  db[c] += sum dy */
void fsN_groupnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N,
                            int64_t C, int64_t S, int64_t G);

/* x[M,D]: rstd[M] = 1/sqrt(mean(x^2) + eps); out = x rstd w (w NULL: 1) */
void fsN_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t M,
                         int64_t D, float eps);
/* dx += rstd dxh - x rstd^3 mean(dxh x), dxh = dy w;  dw += sum_m dy x rstd */
void fsN_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                          const float *rstd, int64_t M, int64_t D);

#endif
