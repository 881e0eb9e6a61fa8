/* f64_rules.h -- torch 1.13's _single_tensor_sgd, _single_tensor_adam(w),
 * _single_tensor_rmsprop, _single_tensor_adagrad and _single_tensor_adadelta
 * on one element of a float64 parameter, every quantity a double: the one
 * text of the cpu's loop (f64_kernels.c) and cuda's kernels (f64_cuda.cu,
 * where the rules compile for the device too).
 *
 * Invariant: element i's update reads and writes element i only, so any
 * order of elements (a loop, a grid) gives the same bits per element.
 * u holds the hyperparameters (its float pointers unused); NULL state
 * buffers are the ones the options do not use, as fsB_backend's. */
#ifndef FS_F64_RULES_H
#define FS_F64_RULES_H

#include <math.h>
#include "backend.h"

#ifdef __CUDACC__
#define FS_F64_RULE static inline __host__ __device__
#else
#define FS_F64_RULE static inline
#endif

FS_F64_RULE void fsB_sgd64(const fsB_update *u, size_t i, double *p, const double *g, double *buf) {
  double d = u->maximize ? -g[i] : g[i];
  if (u->wd != 0) d += u->wd * p[i];
  if (buf) { /* momentum: None buffer -> clone(d_p) */
    buf[i] = u->first ? d : buf[i] * u->momentum + (1 - u->dampening) * d;
    d = u->nesterov ? d + u->momentum * buf[i] : buf[i];
  }
  p[i] += -u->lr * d;
}

/* Adam's step size lr / (1 - beta1^step) and sqrt(1 - beta2^step), once per
 * parameter */
typedef struct fsB_adam64_bias {
  double step_size, bc2_sqrt;
} fsB_adam64_bias;

static inline fsB_adam64_bias fsB_adam64_bias_of(const fsB_update *u) {
  double bc1 = 1 - pow(u->beta1, (double)u->step), bc2 = 1 - pow(u->beta2, (double)u->step);
  fsB_adam64_bias b = {u->lr / bc1, sqrt(bc2)};
  return b;
}

/* AdamW decays p by 1 - lr wd first; Adam adds wd p to the gradient */
FS_F64_RULE void fsB_adam64(const fsB_update *u, fsB_adam64_bias bc, size_t i, double *p, const double *g, double *m,
                            double *v, double *vmax) {
  double gi = u->maximize ? -g[i] : g[i];
  if (u->decoupled) p[i] *= 1 - u->lr * u->wd;
  else if (u->wd != 0) gi += u->wd * p[i];
  m[i] = m[i] * u->beta1 + (1 - u->beta1) * gi;
  v[i] = v[i] * u->beta2 + (1 - u->beta2) * gi * gi;
  double vi = v[i];
  if (vmax) { /* torch.maximum: a NaN wins */
    vi = vmax[i] >= vi || isnan(vmax[i]) ? vmax[i] : vi;
    vmax[i] = vi;
  }
  p[i] += -bc.step_size * m[i] / (sqrt(vi) / bc.bc2_sqrt + u->eps);
}

/* d = g (+ wd p), negated when maximizing: the gradient every rule below
 * starts from */
FS_F64_RULE double fsB_grad64(const fsB_update *u, size_t i, const double *p, const double *g) {
  double d = u->maximize ? -g[i] : g[i];
  return u->wd != 0 ? d + u->wd * p[i] : d;
}

/* sq = alpha sq + (1-alpha) g^2; centered: ga = alpha ga + (1-alpha) g,
 * avg = sqrt(sq - ga^2) + eps, else sqrt(sq) + eps; momentum:
 * buf = momentum buf + g / avg, p -= lr buf; else p -= lr g / avg */
FS_F64_RULE void fsB_rmsprop64(const fsB_update *u, size_t i, double *p, const double *g, double *sq, double *ga,
                               double *buf) {
  double d = fsB_grad64(u, i, p, g);
  sq[i] = sq[i] * u->alpha + (1 - u->alpha) * d * d;
  double avg;
  if (ga) {
    ga[i] = ga[i] * u->alpha + (1 - u->alpha) * d;
    avg = sqrt(sq[i] + -1.0 * ga[i] * ga[i]);
  } else {
    avg = sqrt(sq[i]);
  }
  avg += u->eps;
  if (buf) {
    buf[i] = buf[i] * u->momentum + d / avg;
    p[i] += -u->lr * buf[i];
  } else {
    p[i] += -u->lr * d / avg;
  }
}

/* sum += g^2; p -= clr g / (sqrt(sum) + eps), u->lr being clr */
FS_F64_RULE void fsB_adagrad64(const fsB_update *u, size_t i, double *p, const double *g, double *sum) {
  double d = fsB_grad64(u, i, p, g);
  sum[i] += d * d;
  p[i] += -u->lr * d / (sqrt(sum[i]) + u->eps);
}

/* sq = rho sq + (1-rho) g^2; delta = sqrt(acc + eps) / sqrt(sq + eps) g;
 * acc = rho acc + (1-rho) delta^2; p -= lr delta */
FS_F64_RULE void fsB_adadelta64(const fsB_update *u, size_t i, double *p, const double *g, double *sq, double *acc) {
  double d = fsB_grad64(u, i, p, g);
  sq[i] = sq[i] * u->rho + (1 - u->rho) * d * d;
  double delta = sqrt(acc[i] + u->eps) / sqrt(sq[i] + u->eps) * d;
  acc[i] = acc[i] * u->rho + (1 - u->rho) * delta * delta;
  p[i] += -u->lr * delta;
}

#endif
