/* optim_f64.c -- optimizer updates of float64 parameters (precision="64-true":
 * torch keeps a double parameter's gradient and states in double).
 *
 * Invariant: every quantity is a double, the Python floats included, as
 * torch 1.13's _single_tensor_sgd, _adam(w), _rmsprop, _adagrad and
 * _adadelta compute them on double tensors; the rules run on the
 * parameter's device, through its backend's float64 table (f64_kernels.h;
 * the cpu's in f64_kernels.c, the rules f64_rules.h's).  The other half:
 * optim.c's step_param, which calls this for a
 * float64 parameter. */
#include "optim.h"
#include "f64_kernels.h"

#include <math.h>

int fsO_update_f64(const fsB_update *u, const fsB_backend *be, double *p, const double *g, double *const *s) {
  switch (u->kind) {
  case FSB_UPD_SGD: be->f64->sgd_update(u, p, g, s[0]); break;
  case FSB_UPD_ADAM: be->f64->adam_update(u, p, g, s[0], s[1], s[2]); break;
  case FSB_UPD_RMSPROP: be->f64->rmsprop_update(u, p, g, s[0], s[2], s[1]); break; /* square_avg, grad_avg, momentum */
  case FSB_UPD_ADAGRAD: be->f64->adagrad_update(u, p, g, s[0]); break;
  case FSB_UPD_ADADELTA: be->f64->adadelta_update(u, p, g, s[0], s[1]); break;
  }
  return 0;
}

/* ---- clipping float64 gradients: in double, as torch's clip_grad_norm_ /
 * clip_grad_value_ compute for double gradients ---- */

bool fsO_grads_f64(fs_tensor *const *params, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (params[i]->grad && params[i]->grad->dtype == FS_F64) return true;
  return false;
}

/* p's float64 gradient (on p's device), or NULL + fsT_error (a gradient of
 * another type among them: 64-true converts every parameter). */
static double *grad64(const fs_tensor *p) {
  if (p->grad->dtype != FS_F64) {
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
    const fsB_f64_kernels *f = fsB_of(params[i]->grad)->f64;
    double s = inf ? f->absmax((size_t)params[i]->numel, g) : f->sumsq((size_t)params[i]->numel, g);
    if (inf) acc = s > acc || isnan(s) ? s : acc;
    else acc += s;
  }
  double tn = inf ? acc : sqrt(acc), coef = max_norm / (tn + 1e-6);
  if (coef > 1.0) coef = 1.0;
  for (int64_t i = 0; i < n; i++)
    if (params[i]->grad) fsB_of(params[i]->grad)->f64->scale((size_t)params[i]->numel, coef, grad64(params[i]));
  *total = tn;
  return 0;
}

int fsO_clip_value_f64(fs_tensor *const *params, int64_t n, double clip) {
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    double *g = grad64(params[i]);
    if (!g) return -1;
    fsB_of(params[i]->grad)->f64->clamp((size_t)params[i]->numel, -clip, clip, g);
  }
  return 0;
}
