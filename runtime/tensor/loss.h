/* loss.h -- loss kernels (forward value, backward accumulation), llm.c style.
 * The first pairs are the fast training paths (a mean over rows, behind the
 * backends' fsN_kernels slots).  The rest are torch.nn.functional's losses
 * with all their options: per-row or per-element losses that the entry
 * points (loss_grad.c) reduce; cpu only, staged from other devices. */
#ifndef FS_LOSS_H
#define FS_LOSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* mean_n [logsumexp(logits[n,:]) - logits[n, targets[n]]]
 * logits[N,C], targets[N] already checked to lie in [0, C) */
double fsN_cross_entropy_forward(const float *logits, const int64_t *targets, int64_t N, int64_t C);
/* dlogits[N,C] += dloss * (softmax(logits[n]) - onehot(targets[n])) / N */
void fsN_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *targets,
                                int64_t N, int64_t C, float dloss);
/* mean_i (pred[i] - target[i])^2 over n elements */
double fsN_mse_forward(const float *pred, const float *target, size_t n);
/* dpred += dloss * 2 (pred - target) / n;  dtarget -= the same (each may be NULL) */
void fsN_mse_backward(float *dpred, float *dtarget, const float *pred, const float *target,
                      size_t n, float dloss);

/* ---- class losses: rows x[M,C] (logits, or log-probabilities when
 * !from_logits), class-index targets t[M] or probabilities p[M,C] ---- */
typedef struct fsN_nll {
  int64_t M, C;
  bool from_logits;      /* cross_entropy (log_softmax first) or nll_loss */
  const float *weight;   /* [C] class weights, NULL = 1 */
  int64_t ignore_index;  /* index targets only: such rows lose 0 and weigh 0 */
  float smoothing;       /* label_smoothing in [0, 1] */
} fsN_nll;
/* Index targets: loss[m] = (1-ls) w[t] (-logp[t]) + ls/C sum_c w[c] (-logp[c]),
 * 0 where t = ignore_index; returns sum_m w[t_m] over the rows not ignored
 * (the mean's divisor, as torch's).  A target outside [0, C) that is not
 * ignore_index: -1 + fsT_error "Target 12 is out of bounds.". */
int fsN_nll_forward(float *loss, double *wsum, const float *x, const int64_t *t, const fsN_nll *o);
/* dx[M,C] += g[m] dloss[m]/dx (through log_softmax when from_logits) */
void fsN_nll_backward(float *dx, const float *g, const float *x, const int64_t *t, const fsN_nll *o);
/* Probability targets: loss[m] = -sum_c w[c] q[c] logp[c], q = (1-ls) p + ls/C */
void fsN_nll_prob_forward(float *loss, const float *x, const float *p, const fsN_nll *o);
/* dx += g dloss/dx;  dp += g dloss/dp = -g w[c] (1-ls) logp[c]  (either may be NULL) */
void fsN_nll_prob_backward(float *dx, float *dp, const float *g, const float *x, const float *p,
                           const fsN_nll *o);

/* ---- elementwise losses: out[i] = f(x[i], y[i]) over n elements ---- */
typedef enum fsN_ploss {
  FSN_MSE,        /* (x - y)^2 */
  FSN_L1,         /* |x - y| */
  FSN_SMOOTH_L1,  /* |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta  (beta 0: L1) */
  FSN_HUBER,      /* |d| <= delta ? 0.5 d^2 : delta (|d| - 0.5 delta) */
  FSN_BCE,        /* -(y log x + (1-y) log(1-x)), each log clamped at -100 */
  FSN_BCE_LOGITS, /* (1-y) x + (1 + (pw-1) y) (log(1 + e^-|x|) + max(-x, 0)) */
  FSN_KL_DIV,     /* y (log y - x) (0 where y = 0); log_target: e^y (y - x) */
} fsN_ploss;
typedef struct fsN_ploss_opts {
  fsN_ploss op;
  double param;         /* beta, delta; KL_DIV: 1 = log_target */
  const float *pos_weight; /* BCE_LOGITS: [P] over the last dim (P = n_pw), or NULL */
  int64_t n_pw;
} fsN_ploss_opts;
void fsN_ploss_forward(float *out, const float *x, const float *y, size_t n, const fsN_ploss_opts *o);
/* dx[i] += g[i] df/dx;  dy[i] += g[i] df/dy  (either may be NULL) */
void fsN_ploss_backward(float *dx, float *dy, const float *g, const float *x, const float *y,
                        size_t n, const fsN_ploss_opts *o);

#endif
