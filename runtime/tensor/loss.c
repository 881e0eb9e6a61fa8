/* loss.c -- loss kernels (loss.h): the fast cross entropy and mean squared
 * error, and torch.nn.functional's losses with their options. */
#include "loss.h"

#include <math.h>
#include "tensor.h"
#include "vmath.h"

/* the cross entropy and its row_lse, the elementwise losses' loops: one
 * text with f64.c's (loss_typed.h, loss_scalar.h) */
#include "loss_typed.h"

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

/* ---- class losses ---- */

static float class_weight(const fsN_nll *o, int64_t c) { return o->weight ? o->weight[c] : 1.0f; }

int fsN_nll_forward(float *loss, double *wsum, const float *x, const int64_t *t, const fsN_nll *o) {
  double W = 0;
  float ls = o->smoothing;
  for (int64_t m = 0; m < o->M; m++) {
    int64_t tm = t[m];
    if (tm == o->ignore_index) {
      loss[m] = 0;
      continue;
    }
    if (tm < 0 || tm >= o->C) {
      fsT_seterr("Target %lld is out of bounds.", (long long)tm);
      return -1;
    }
    const float *xr = x + m * o->C;
    float lse = o->from_logits ? (float)row_lse(xr, o->C) : 0.0f;
    double smooth = 0;
    if (ls > 0)
      for (int64_t c = 0; c < o->C; c++) smooth -= class_weight(o, c) * (double)(xr[c] - lse);
    float wt = class_weight(o, tm);
    loss[m] = (float)((1 - ls) * wt * -(double)(xr[tm] - lse) + ls / (double)o->C * smooth);
    W += wt;
  }
  *wsum = W;
  return 0;
}

void fsN_nll_backward(float *dx, const float *g, const float *x, const int64_t *t, const fsN_nll *o) {
  float ls = o->smoothing;
  for (int64_t m = 0; m < o->M; m++) {
    if (t[m] == o->ignore_index || g[m] == 0) continue;
    const float *xr = x + m * o->C;
    float *d = dx + m * o->C;
    /* dloss/dlogp[c] = -g ((1-ls) w[t] [c == t] + ls/C w[c]); through
     * log_softmax: dx[c] = dlogp[c] - softmax[c] sum_j dlogp[j] */
    float lse = o->from_logits ? (float)row_lse(xr, o->C) : 0.0f;
    double total = 0;
    for (int64_t c = 0; c < o->C; c++) {
      float dl = -g[m] * ((c == t[m] ? (1 - ls) * class_weight(o, c) : 0.0f) + ls / (float)o->C * class_weight(o, c));
      total += dl;
      d[c] += dl;
    }
    if (o->from_logits)
      for (int64_t c = 0; c < o->C; c++) d[c] -= expf(xr[c] - lse) * (float)total;
  }
}

void fsN_nll_prob_forward(float *loss, const float *x, const float *p, const fsN_nll *o) {
  float ls = o->smoothing;
  for (int64_t m = 0; m < o->M; m++) {
    const float *xr = x + m * o->C, *pr = p + m * o->C;
    float lse = o->from_logits ? (float)row_lse(xr, o->C) : 0.0f;
    double s = 0;
    for (int64_t c = 0; c < o->C; c++)
      s -= class_weight(o, c) * ((1 - ls) * pr[c] + ls / (float)o->C) * (double)(xr[c] - lse);
    loss[m] = (float)s;
  }
}

void fsN_nll_prob_backward(float *dx, float *dp, const float *g, const float *x, const float *p,
                           const fsN_nll *o) {
  float ls = o->smoothing;
  for (int64_t m = 0; m < o->M; m++) {
    const float *xr = x + m * o->C, *pr = p + m * o->C;
    float lse = o->from_logits ? (float)row_lse(xr, o->C) : 0.0f;
    if (dp)
      for (int64_t c = 0; c < o->C; c++) dp[m * o->C + c] -= g[m] * class_weight(o, c) * (1 - ls) * (xr[c] - lse);
    if (!dx) continue;
    float *d = dx + m * o->C;
    double total = 0;
    for (int64_t c = 0; c < o->C; c++) {
      float dl = -g[m] * class_weight(o, c) * ((1 - ls) * pr[c] + ls / (float)o->C);
      total += dl;
      d[c] += dl;
    }
    if (o->from_logits)
      for (int64_t c = 0; c < o->C; c++) d[c] -= expf(xr[c] - lse) * (float)total;
  }
}

/* ---- elementwise losses: loss_typed.h's loops ---- */

void fsN_ploss_forward(float *out, const float *x, const float *y, size_t n, const fsN_ploss_opts *o) {
  ploss_forward(o->op, o->param, o->pos_weight, o->n_pw, out, x, y, n);
}

void fsN_ploss_backward(float *dx, float *dy, const float *g, const float *x, const float *y,
                        size_t n, const fsN_ploss_opts *o) {
  ploss_backward(o->op, o->param, o->pos_weight, o->n_pw, dx, dy, g, x, y, n);
}
