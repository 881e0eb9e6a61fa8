/* loss_scalar.h -- the per-element formulas of loss.h's elementwise losses
 * (fsN_ploss) over FS_REAL (typed.h): the loss of one element and its two
 * gradients, torch 1.13's formulas.
 *
 * Invariant: one text for the cpu and cuda, as ops_scalar.h is:
 * loss_typed.h's loops (float in loss.c, double in f64_kernels.c) and
 * f64_cuda.cu's kernels (double) call these, every function FS_HOSTDEV.
 * p is the loss's parameter (beta, delta; KL_DIV: nonzero = log_target) in
 * the element type, pw BCE_LOGITS' pos_weight of the element (1: none).
 * Needs loss.h (the op enum) first. */
#ifndef FS_LOSS_SCALAR_H
#define FS_LOSS_SCALAR_H

#include "tensor.h" /* FS_HOSTDEV */
#include "typed.h"

static inline FS_HOSTDEV FS_REAL FS_RK(clamped_log)(FS_REAL v) { /* torch's BCE clamps its logs at -100 */
  FS_REAL l = FS_RM(log)(v);
  return l < (FS_REAL)-100 ? (FS_REAL)-100 : l;
}

/* log(1 + e^-|x|) + max(-x, 0): softplus(-x) without overflow */
static inline FS_HOSTDEV FS_REAL FS_RK(softplus_neg)(FS_REAL x) {
  return FS_RM(log1p)(FS_RM(exp)(-FS_RM(fabs)(x))) + FS_RM(fmax)(-x, (FS_REAL)0);
}

static inline FS_HOSTDEV FS_REAL FS_RK(ploss1)(fsN_ploss op, FS_REAL p, FS_REAL x, FS_REAL y, FS_REAL pw) {
  FS_REAL d = x - y, a = FS_RM(fabs)(d);
  switch (op) {
  case FSN_MSE: return d * d;
  case FSN_L1: return a;
  case FSN_SMOOTH_L1: return a < p ? (FS_REAL)0.5 * d * d / p : a - (FS_REAL)0.5 * p;
  case FSN_HUBER: return a <= p ? (FS_REAL)0.5 * d * d : p * (a - (FS_REAL)0.5 * p);
  case FSN_BCE: return -(y * FS_RK(clamped_log)(x) + (1 - y) * FS_RK(clamped_log)(1 - x));
  case FSN_BCE_LOGITS: return (1 - y) * x + (1 + (pw - 1) * y) * FS_RK(softplus_neg)(x);
  case FSN_KL_DIV: return p != 0 ? FS_RM(exp)(y) * (y - x) : y > 0 ? y * (FS_RM(log)(y) - x) : 0;
  }
  return 0;
}

/* d loss / d x and d loss / d y of one element */
static inline FS_HOSTDEV void FS_RK(ploss_grad1)(fsN_ploss op, FS_REAL p, FS_REAL x, FS_REAL y, FS_REAL pw,
                                                  FS_REAL *gx_, FS_REAL *gy_) {
  FS_REAL d = x - y, a = FS_RM(fabs)(d), sgn = (FS_REAL)((d > 0) - (d < 0)), gx = 0, gy = 0;
  switch (op) {
  case FSN_MSE: gx = 2 * d; gy = -gx; break;
  case FSN_L1: gx = sgn; gy = -gx; break;
  case FSN_SMOOTH_L1: gx = a < p ? d / p : sgn; gy = -gx; break;
  case FSN_HUBER: gx = a <= p ? d : p * sgn; gy = -gx; break;
  case FSN_BCE: { /* torch: (x - y) / max((1 - x) x, eps) with eps 1e-12 */
    FS_REAL den = (1 - x) * x;
    gx = d / (den > (FS_REAL)1e-12 ? den : (FS_REAL)1e-12);
    gy = FS_RK(clamped_log)(1 - x) - FS_RK(clamped_log)(x);
    break;
  }
  case FSN_BCE_LOGITS: { /* d/dx = (1-y) - lw sigmoid(-x);  d/dy = -x - (pw-1) softplus(-x) */
    FS_REAL lw = 1 + (pw - 1) * y, sig_neg = (FS_REAL)1 / ((FS_REAL)1 + FS_RM(exp)(x));
    gx = (1 - y) - lw * sig_neg;
    gy = -x + (pw - 1) * FS_RK(softplus_neg)(x);
    break;
  }
  case FSN_KL_DIV:
    if (p != 0) {
      gx = -FS_RM(exp)(y);
      gy = FS_RM(exp)(y) * (y - x + 1);
    } else if (y > 0) {
      gx = -y;
      gy = FS_RM(log)(y) + 1 - x;
    }
    break;
  }
  *gx_ = gx;
  *gy_ = gy;
}

#endif
