/* optim_f64.c -- optimizer updates of float64 parameters (precision="64-true":
 * torch keeps a double parameter's gradient and states in double).
 *
 * Invariant: every quantity is a double, the Python floats included, as
 * torch 1.13's _single_tensor_sgd / _single_tensor_adam(w) compute them on
 * double tensors; the update kinds without a double rule here are refused
 * with an error naming the optimizer.  The other half: optim.c's
 * step_param, which calls this for a float64 parameter. */
#include "optim.h"

#include <math.h>

static void sgd64(const fsB_update *u, double *p, const double *g, double *buf) {
  for (size_t i = 0; i < u->n; i++) {
    double d = u->maximize ? -g[i] : g[i];
    if (u->wd != 0) d += u->wd * p[i];
    if (buf) { /* momentum: None buffer -> clone(d_p) */
      buf[i] = u->first ? d : buf[i] * u->momentum + (1 - u->dampening) * d;
      d = u->nesterov ? d + u->momentum * buf[i] : buf[i];
    }
    p[i] += -u->lr * d;
  }
}

/* AdamW decays p by 1 - lr wd first; Adam adds wd p to the gradient */
static void adam64(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax) {
  double bc1 = 1 - pow(u->beta1, (double)u->step), bc2 = 1 - pow(u->beta2, (double)u->step);
  double step_size = u->lr / bc1, bc2_sqrt = sqrt(bc2);
  for (size_t i = 0; i < u->n; i++) {
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
    p[i] += -step_size * m[i] / (sqrt(vi) / bc2_sqrt + u->eps);
  }
}

int fsO_update_f64(const fsB_update *u, double *p, const double *g, double *const *s) {
  switch (u->kind) {
  case FSB_UPD_SGD: sgd64(u, p, g, s[0]); return 0;
  case FSB_UPD_ADAM: adam64(u, p, g, s[0], s[1], s[2]); return 0;
  case FSB_UPD_RMSPROP:
  case FSB_UPD_ADAGRAD:
  case FSB_UPD_ADADELTA: break;
  }
  static const char *const names[] = {[FSB_UPD_RMSPROP] = "RMSprop", [FSB_UPD_ADAGRAD] = "Adagrad",
                                      [FSB_UPD_ADADELTA] = "Adadelta"};
  fsT_seterr("%s has no float64 update in this runtime (precision=\"64-true\" runs SGD, Adam and AdamW)",
             names[u->kind]);
  return -1;
}
