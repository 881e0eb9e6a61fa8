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

/* ---- clipping float64 gradients: in double, as torch's clip_grad_norm_ /
 * clip_grad_value_ compute for double gradients ---- */

bool fsO_grads_f64(fs_tensor *const *params, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (params[i]->grad && params[i]->grad->dtype == FS_F64) return true;
  return false;
}

/* p's float64 gradient on the host, or NULL + fsT_error (a gradient of
 * another type among them: 64-true converts every parameter). */
static double *grad64(const fs_tensor *p) {
  if (p->grad->dtype != FS_F64 || p->grad->device != FS_DEV_CPU) {
    fsT_seterr("clipping: a %s gradient among float64 ones", fsT_dtype_name(p->grad->dtype));
    return NULL;
  }
  return fsT_f64(p->grad);
}

int fsO_clip_norm_f64(fs_tensor *const *params, int64_t n, double max_norm, bool inf, double *total) {
  double acc = 0; /* per-tensor norms, then their norm (torch.norm(stack(norms))) */
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    const double *g = grad64(params[i]);
    if (!g) return -1;
    double s = 0;
    for (int64_t k = 0; k < params[i]->numel; k++) {
      if (inf) s = fabs(g[k]) > s || isnan(g[k]) ? fabs(g[k]) : s;
      else s += g[k] * g[k];
    }
    if (inf) acc = s > acc || isnan(s) ? s : acc;
    else acc += s;
  }
  double tn = inf ? acc : sqrt(acc), coef = max_norm / (tn + 1e-6);
  if (coef > 1.0) coef = 1.0;
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    double *g = grad64(params[i]);
    for (int64_t k = 0; k < params[i]->numel; k++) g[k] *= coef;
  }
  *total = tn;
  return 0;
}

int fsO_clip_value_f64(fs_tensor *const *params, int64_t n, double clip) {
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    double *g = grad64(params[i]);
    if (!g) return -1;
    for (int64_t k = 0; k < params[i]->numel; k++) g[k] = g[k] < -clip ? -clip : g[k] > clip ? clip : g[k];
  }
  return 0;
}
