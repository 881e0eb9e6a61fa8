/* optim.c -- optimizers and clipping (see optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include "backend.h"

static fs_optim *new_optim(fsO_kind kind, fs_tensor **params, int64_t n, double lr, double wd) {
  if (!(lr >= 0)) {
    fsT_seterr("Invalid learning rate: %g", lr);
    return NULL;
  }
  if (!(wd >= 0)) {
    fsT_seterr("Invalid weight_decay value: %g", wd);
    return NULL;
  }
  if (n == 0) {
    fsT_seterr("optimizer got an empty parameter list");
    return NULL;
  }
  fs_optim *o = calloc(1, sizeof *o);
  size_t cnt = (size_t)n;
  if (!o || !(o->params = calloc(cnt, sizeof *o->params)) || !(o->buf0 = calloc(cnt, sizeof *o->buf0)) ||
      !(o->buf1 = calloc(cnt, sizeof *o->buf1)) || !(o->steps = calloc(cnt, sizeof *o->steps))) {
    fsO_release(o);
    fsT_seterr("out of memory");
    return NULL;
  }
  o->refcount = 1;
  o->kind = kind;
  o->lr = lr;
  o->weight_decay = wd;
  o->nparams = n;
  for (int64_t i = 0; i < n; i++) o->params[i] = fsT_retain(params[i]);
  return o;
}

fs_optim *fsO_sgd(fs_tensor **params, int64_t n, double lr, double momentum,
                  double dampening, double weight_decay, bool nesterov) {
  if (!(momentum >= 0)) {
    fsT_seterr("Invalid momentum value: %g", momentum);
    return NULL;
  }
  if (nesterov && (momentum <= 0 || dampening != 0)) {
    fsT_seterr("Nesterov momentum requires a momentum and zero dampening");
    return NULL;
  }
  fs_optim *o = new_optim(FSO_SGD, params, n, lr, weight_decay);
  if (o) {
    o->momentum = momentum;
    o->dampening = dampening;
    o->nesterov = nesterov;
  }
  return o;
}

fs_optim *fsO_adam(fs_tensor **params, int64_t n, bool decoupled, double lr, double beta1,
                   double beta2, double eps, double weight_decay) {
  if (!(eps >= 0)) {
    fsT_seterr("Invalid epsilon value: %g", eps);
    return NULL;
  }
  if (!(beta1 >= 0 && beta1 < 1)) {
    fsT_seterr("Invalid beta parameter at index 0: %g", beta1);
    return NULL;
  }
  if (!(beta2 >= 0 && beta2 < 1)) {
    fsT_seterr("Invalid beta parameter at index 1: %g", beta2);
    return NULL;
  }
  fs_optim *o = new_optim(decoupled ? FSO_ADAMW : FSO_ADAM, params, n, lr, weight_decay);
  if (o) {
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
  }
  return o;
}

int fsO_replace_params(fs_optim *o, fs_tensor *const *params, int64_t n) {
  for (int64_t i = 0; i < o->nparams; i++)
    if (o->buf0[i] || o->buf1[i] || o->steps[i]) {
      fsT_seterr("the optimizer has already stepped; create it after setting the model up");
      return -1;
    }
  size_t cnt = (size_t)(n ? n : 1);
  fs_tensor **p = calloc(cnt, sizeof *p), **b0 = calloc(cnt, sizeof *b0), **b1 = calloc(cnt, sizeof *b1);
  int64_t *st = calloc(cnt, sizeof *st);
  if (!p || !b0 || !b1 || !st) {
    free(p), free(b0), free(b1), free(st);
    fsT_seterr("out of memory");
    return -1;
  }
  for (int64_t i = 0; i < n; i++) p[i] = fsT_retain(params[i]);
  for (int64_t i = 0; i < o->nparams; i++) fsT_release(o->params[i]);
  free(o->params), free(o->buf0), free(o->buf1), free(o->steps);
  o->params = p, o->buf0 = b0, o->buf1 = b1, o->steps = st;
  o->nparams = n;
  return 0;
}

fs_optim *fsO_retain(fs_optim *o) {
  if (o) o->refcount++;
  return o;
}

void fsO_release(fs_optim *o) {
  if (!o || --o->refcount > 0) return;
  for (int64_t i = 0; o->params && i < o->nparams; i++) {
    fsT_release(o->params[i]);
    if (o->buf0) fsT_release(o->buf0[i]);
    if (o->buf1) fsT_release(o->buf1[i]);
  }
  free(o->params);
  free(o->buf0);
  free(o->buf1);
  free(o->steps);
  free(o);
}

/* Lazily created state buffer, zeroed. */
static float *state(fs_tensor **slot, const fs_tensor *p) {
  if (!*slot) *slot = fsT_zeros_like(p);
  return *slot ? fsT_f32(*slot) : NULL;
}

int fsO_step(fs_optim *o) {
  for (int64_t i = 0; i < o->nparams; i++) {
    fs_tensor *p = o->params[i];
    if (!p->grad) continue;
    if (!p->data) {
      fsT_seterr("optimizer step: a parameter is on the meta device");
      return -1;
    }
    const fsB_backend *be = fsB_of(p);
    size_t n = (size_t)p->numel;
    bool first = o->steps[i]++ == 0;
    if (o->kind == FSO_SGD) {
      float *buf = o->momentum != 0 ? state(&o->buf0[i], p) : NULL;
      if (o->momentum != 0 && !buf) return -1;
      be->sgd_update(n, fsT_f32(p), fsT_f32(p->grad), buf, first, o->lr, o->momentum,
                     o->dampening, o->weight_decay, o->nesterov);
    } else {
      float *m = state(&o->buf0[i], p), *v = m ? state(&o->buf1[i], p) : NULL;
      if (!v) return -1;
      be->adam_update(n, fsT_f32(p), fsT_f32(p->grad), m, v, o->lr, o->beta1, o->beta2, o->eps,
                      o->weight_decay, o->kind == FSO_ADAMW, o->steps[i]);
    }
  }
  return 0;
}

void fsO_zero_grad(fs_optim *o) {
  for (int64_t i = 0; i < o->nparams; i++) {
    fsT_release(o->params[i]->grad);
    o->params[i]->grad = NULL;
  }
}

int fsO_clip_grad_norm(fs_tensor *const *params, int64_t n, double max_norm,
                       double norm_type, double *total) {
  return fsO_clip_grad_norm_with(params, n, max_norm, norm_type, NULL, NULL, total);
}

int fsO_clip_grad_norm_with(fs_tensor *const *params, int64_t n, double max_norm, double norm_type,
                            fsO_combine combine, void *ud, double *total) {
  bool inf = isinf(norm_type) && norm_type > 0;
  if (!inf && norm_type != 2.0) {
    fsT_seterr("clip_gradients: norm_type %g is not supported (use 2.0 or inf)", norm_type);
    return -1;
  }
  /* per-tensor norms in float, then their norm, as torch.norm(stack(norms)) */
  float acc = 0;
  for (int64_t i = 0; i < n; i++) {
    fs_tensor *g = params[i]->grad;
    if (!g) continue;
    if (inf) {
      float m = fsB_of(g)->absmax((size_t)g->numel, fsT_f32(g));
      acc = m > acc || isnan(m) ? m : acc;
    } else {
      float norm = (float)sqrt(fsB_of(g)->sumsq((size_t)g->numel, fsT_f32(g)));
      acc += norm * norm;
    }
  }
  if (combine && combine(ud, &acc, inf) < 0) return -1;
  float tn = inf ? acc : sqrtf(acc);
  float coef = (float)max_norm / (tn + 1e-6f);
  if (coef > 1.0f) coef = 1.0f;
  for (int64_t i = 0; i < n; i++) {
    fs_tensor *g = params[i]->grad;
    if (g) fsB_of(g)->scale((size_t)g->numel, coef, fsT_f32(g));
  }
  *total = tn;
  return 0;
}

void fsO_clip_grad_value(fs_tensor *const *params, int64_t n, double clip) {
  for (int64_t i = 0; i < n; i++) {
    fs_tensor *g = params[i]->grad;
    if (g) fsB_of(g)->clamp((size_t)g->numel, (float)-clip, (float)clip, fsT_f32(g));
  }
}
