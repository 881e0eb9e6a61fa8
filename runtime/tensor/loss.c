/* loss.c -- cross entropy and mean squared error. */
#include "loss.h"

#include <math.h>
#include "vmath.h"

/* logsumexp of one row, max-shifted; the sum is kept in double: the loss is
 * compared with torch to 1e-4 relative and summed over many rows. */
FS_VECTOR_TARGET
static double row_lse(const float *x, int64_t C) {
  float mx = x[0];
#pragma omp simd reduction(max:mx)
  for (int64_t c = 1; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double s = 0;
#pragma omp simd reduction(+:s)
  for (int64_t c = 0; c < C; c++) s += fsVM_expf(x[c] - mx);
  return mx + log(s);
}

double fsN_cross_entropy_forward(const float *logits, const int64_t *targets, int64_t N, int64_t C) {
  double total = 0;
  for (int64_t n = 0; n < N; n++) {
    const float *x = logits + n * C;
    total += row_lse(x, C) - x[targets[n]];
  }
  return N ? total / (double)N : NAN; /* torch: mean over no elements is nan */
}

FS_VECTOR_TARGET
void fsN_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *targets,
                                int64_t N, int64_t C, float dloss) {
  float scale = dloss / (float)N;
  for (int64_t n = 0; n < N; n++) {
    const float *x = logits + n * C;
    float *dx = dlogits + n * C;
    float lse = (float)row_lse(x, C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) dx[c] += scale * fsVM_expf(x[c] - lse);
    dx[targets[n]] -= scale;
  }
}

double fsN_mse_forward(const float *pred, const float *target, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)pred[i] - target[i];
    s += d * d;
  }
  return n ? s / (double)n : NAN;
}

void fsN_mse_backward(float *dpred, float *dtarget, const float *pred, const float *target,
                      size_t n, float dloss) {
  float scale = 2.0f * dloss / (float)n;
  for (size_t i = 0; i < n; i++) {
    float g = scale * (pred[i] - target[i]);
    if (dpred) dpred[i] += g;
    if (dtarget) dtarget[i] -= g;
  }
}
