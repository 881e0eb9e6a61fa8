/* optim.c -- optimizers in parameter groups, and clipping (see optim.h).
 * The element-wise arithmetic is the backends' (backend_cpu.c); this file
 * keeps torch's bookkeeping: groups, validation, lazily made state, step
 * counts and the Python-float scalars torch computes per step. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include "autograd.h"
#include "backend.h"
#include "f64_kernels.h"

fsO_hyper fsO_defaults(fsO_kind kind) {
  switch (kind) {
  case FSO_SGD: return (fsO_hyper){.lr = NAN};
  case FSO_ADAM: return (fsO_hyper){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  case FSO_ADAMW:
    return (fsO_hyper){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
  case FSO_RMSPROP: return (fsO_hyper){.lr = 1e-2, .alpha = 0.99, .eps = 1e-8};
  case FSO_ADAGRAD: return (fsO_hyper){.lr = 1e-2, .eps = 1e-10};
  case FSO_ADADELTA: return (fsO_hyper){.lr = 1.0, .rho = 0.9, .eps = 1e-6};
  }
  return (fsO_hyper){0};
}

/* torch's constructors' checks, in their order */
int fsO_check(fsO_kind kind, const fsO_hyper *h) {
  if (!(h->lr >= 0)) return fsT_seterr("Invalid learning rate: %g", h->lr), -1;
  if (kind == FSO_ADAGRAD && !(h->lr_decay >= 0)) return fsT_seterr("Invalid lr_decay value: %g", h->lr_decay), -1;
  if (kind == FSO_ADADELTA && !(h->rho >= 0 && h->rho <= 1)) return fsT_seterr("Invalid rho value: %g", h->rho), -1;
  if (kind != FSO_SGD && kind != FSO_ADAGRAD && !(h->eps >= 0))
    return fsT_seterr("Invalid epsilon value: %g", h->eps), -1;
  if (kind == FSO_ADAM || kind == FSO_ADAMW) {
    if (!(h->beta1 >= 0 && h->beta1 < 1)) return fsT_seterr("Invalid beta parameter at index 0: %g", h->beta1), -1;
    if (!(h->beta2 >= 0 && h->beta2 < 1)) return fsT_seterr("Invalid beta parameter at index 1: %g", h->beta2), -1;
  }
  if ((kind == FSO_SGD || kind == FSO_RMSPROP) && !(h->momentum >= 0))
    return fsT_seterr("Invalid momentum value: %g", h->momentum), -1;
  if (!(h->weight_decay >= 0)) return fsT_seterr("Invalid weight_decay value: %g", h->weight_decay), -1;
  if (kind == FSO_RMSPROP && !(h->alpha >= 0)) return fsT_seterr("Invalid alpha value: %g", h->alpha), -1;
  if (kind == FSO_ADAGRAD) {
    if (!(h->initial_accumulator_value >= 0))
      return fsT_seterr("Invalid initial_accumulator_value value: %g", h->initial_accumulator_value), -1;
    if (!(h->eps >= 0)) return fsT_seterr("Invalid epsilon value: %g", h->eps), -1;
  }
  if (kind == FSO_SGD && h->nesterov && (h->momentum <= 0 || h->dampening != 0))
    return fsT_seterr("Nesterov momentum requires a momentum and zero dampening"), -1;
  return 0;
}

const char *fsO_state_name(fsO_kind kind, int which) {
  static const char *const names[][3] = {
    [FSO_SGD] = {"momentum_buffer", NULL, NULL},
    [FSO_ADAM] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FSO_ADAMW] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FSO_RMSPROP] = {"square_avg", "momentum_buffer", "grad_avg"},
    [FSO_ADAGRAD] = {"sum", NULL, NULL},
    [FSO_ADADELTA] = {"square_avg", "acc_delta", NULL},
  };
  return which >= 0 && which < 3 ? names[kind][which] : NULL;
}

int fsO_state_buffers(const fs_optim *o) {
  int most = 0;
  for (int64_t k = 0; k < o->ngroups; k++) {
    const fsO_hyper *h = &o->groups[k].h;
    int n = o->kind == FSO_SGD ? h->momentum != 0
          : o->kind == FSO_RMSPROP ? 1 + (h->momentum > 0) + h->centered
          : o->kind == FSO_ADAGRAD ? 1 : o->kind == FSO_ADADELTA ? 2 : 2 + h->amsgrad;
    most = n > most ? n : most;
  }
  return most;
}

/* Grows every per-parameter array to hold `total` parameters (new slots zeroed). */
static int grow(fs_optim *o, int64_t total) {
  size_t old = (size_t)o->nparams, cnt = (size_t)total;
  fs_tensor ***bufs[4] = {&o->params, &o->buf0, &o->buf1, &o->buf2};
  for (int k = 0; k < 4; k++) {
    fs_tensor **b = realloc(*bufs[k], cnt * sizeof **bufs[k]);
    if (!b) return fsT_seterr("out of memory"), -1;
    for (size_t i = old; i < cnt; i++) b[i] = NULL;
    *bufs[k] = b;
  }
  int64_t *st = realloc(o->steps, cnt * sizeof *st);
  if (!st) return fsT_seterr("out of memory"), -1;
  for (size_t i = old; i < cnt; i++) st[i] = 0;
  o->steps = st;
  return 0;
}

int fsO_add_group(fs_optim *o, fs_tensor *const *params, int64_t n, const fsO_hyper *h) {
  if (fsO_check(o->kind, h) < 0) return -1;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < o->nparams; j++)
      if (o->params[j] == params[i])
        return fsT_seterr("some parameters appear in more than one parameter group"), -1;
  }
  fsO_group *g = realloc(o->groups, (size_t)(o->ngroups + 1) * sizeof *g);
  if (!g) return fsT_seterr("out of memory"), -1;
  o->groups = g;
  if (n && grow(o, o->nparams + n) < 0) return -1;
  o->groups[o->ngroups++] = (fsO_group){*h, o->nparams, n};
  for (int64_t i = 0; i < n; i++) o->params[o->nparams + i] = fsT_retain(params[i]);
  o->nparams += n;
  return 0;
}

fs_optim *fsO_new(fsO_kind kind, fs_tensor *const *params, int64_t n, const fsO_hyper *h) {
  if (fsO_check(kind, h) < 0) return NULL;
  if (n == 0) {
    fsT_seterr("optimizer got an empty parameter list");
    return NULL;
  }
  fs_optim *o = calloc(1, sizeof *o);
  if (!o) {
    fsT_seterr("out of memory");
    return NULL;
  }
  o->refcount = 1;
  o->kind = kind;
  if (fsO_add_group(o, params, n, h) < 0) {
    fsO_release(o);
    return NULL;
  }
  return o;
}

int fsO_replace_params(fs_optim *o, fs_tensor *const *params, int64_t n) {
  if (o->ngroups != 1) {
    fsT_seterr("an optimizer with %lld parameter groups cannot step FSDP's flat shards (use one group)",
               (long long)o->ngroups);
    return -1;
  }
  for (int64_t i = 0; i < o->nparams; i++)
    if (o->buf0[i] || o->buf1[i] || o->buf2[i] || o->steps[i]) {
      fsT_seterr("the optimizer has already stepped; create it after setting the model up");
      return -1;
    }
  if (n > o->nparams && grow(o, n) < 0) return -1;
  for (int64_t i = 0; i < n; i++) fsT_retain(params[i]);
  for (int64_t i = 0; i < o->nparams; i++) fsT_release(o->params[i]);
  for (int64_t i = 0; i < n; i++) o->params[i] = params[i];
  o->nparams = n;
  o->groups[0].n = n;
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
    fsT_release(o->buf0[i]);
    fsT_release(o->buf1[i]);
    fsT_release(o->buf2[i]);
  }
  free(o->params);
  free(o->buf0);
  free(o->buf1);
  free(o->buf2);
  free(o->steps);
  free(o->groups);
  free(o);
}

/* Lazily created state buffer of p's type: zeros, or `fill` (Adagrad's
 * initial sum; a float64 one holds the double, as torch's full_like).
 * NULL + fsT_error on OOM. */
static fs_tensor *state(fs_tensor **slot, const fs_tensor *p, double fill) {
  if (!*slot) {
    fs_tensor *t = fsT_zeros(FS_F32, p->device, p->rank, p->shape);
    if (t && fill != 0 && p->dtype != FS_F64) fsB_of(p)->fill(fsT_f32(t), (size_t)p->numel, (float)fill);
    if (t && p->dtype != FS_F32 && fsT_set_dtype(t, p->dtype) < 0) {
      fsT_release(t);
      t = NULL;
    }
    if (t && fill != 0 && p->dtype == FS_F64) fsB_of(p)->f64->shift((size_t)p->numel, fill, fsT_f64(t)); /* 0 + fill */
    *slot = t;
  }
  return *slot;
}

/* A low-precision parameter's step: float32 host copies of the parameter,
 * its gradient and its states (values of the parameter's type, so the
 * copies back are exact), torch's rule with its roundings
 * (fsB_update_low). */
static int step_low(fs_tensor *p, fs_tensor *const *st, fsB_update *u) {
  fs_tensor *w[4] = {fsT_to_dtype(p, FS_F32), NULL, NULL, NULL}, *hg = NULL;
  int rc = -1;
  for (int k = 0; k < 3; k++)
    if (st[k] && !(w[k + 1] = fsT_to_dtype(st[k], FS_F32))) goto out;
  if (!w[0]) goto out;
  fs_tensor *hw[4] = {NULL, NULL, NULL, NULL};
  for (int k = 0; k < 4; k++) hw[k] = w[k] ? fsT_to_device(w[k], FS_DEV_CPU) : NULL;
  fs_tensor *g32 = fsT_to_dtype(p->grad, FS_F32); /* a low parameter's grad has its type */
  hg = g32 ? fsT_to_device(g32, FS_DEV_CPU) : NULL;
  fsT_release(g32);
  bool ok = hg != NULL;
  for (int k = 0; k < 4; k++) ok &= !w[k] || hw[k];
  if (ok) {
    u->p = fsT_f32(hw[0]);
    u->g = fsT_f32(hg);
    for (int k = 0; k < 3; k++) u->s[k] = hw[k + 1] ? fsT_f32(hw[k + 1]) : NULL;
    fsB_update_low(p->dtype, u);
    rc = 0;
    for (int k = 0; rc == 0 && k < 4; k++) {
      fs_tensor *dst = k ? st[k - 1] : p;
      if (!hw[k]) continue;
      fs_tensor *c = fsT_to_dtype(hw[k], dst->dtype);
      rc = c && fsB_transfer(dst->device, dst->data, FS_DEV_CPU, c->data, fsT_nbytes(dst)) == 0 ? 0 : -1;
      fsT_release(c);
    }
  }
  for (int k = 0; k < 4; k++) fsT_release(hw[k]);
out:
  for (int k = 0; k < 4; k++) fsT_release(w[k]);
  fsT_release(hg);
  return rc;
}

/* One parameter's update under its group's h. */
static int step_param(fs_optim *o, int64_t i, const fsO_hyper *h) {
  fs_tensor *p = o->params[i];
  const fsB_backend *be = fsB_of(p);
  fsB_update u = {.n = (size_t)p->numel, .lr = h->lr, .momentum = h->momentum, .dampening = h->dampening,
                  .wd = h->weight_decay, .beta1 = h->beta1, .beta2 = h->beta2, .eps = h->eps,
                  .alpha = h->alpha, .rho = h->rho, .nesterov = h->nesterov, .maximize = h->maximize};
  fs_tensor *st[3] = {NULL, NULL, NULL};
  bool need[3] = {false, false, false};
  double fill = 0;
  switch (o->kind) {
  case FSO_SGD:
    u.kind = FSB_UPD_SGD;
    u.first = !o->buf0[i]; /* torch: momentum_buffer None -> clone(d_p) */
    need[0] = h->momentum != 0;
    break;
  case FSO_ADAM:
  case FSO_ADAMW:
    u.kind = FSB_UPD_ADAM;
    u.decoupled = o->kind == FSO_ADAMW;
    need[0] = need[1] = true;
    need[2] = h->amsgrad;
    break;
  case FSO_RMSPROP:
    u.kind = FSB_UPD_RMSPROP;
    need[0] = true;
    need[1] = h->momentum > 0;
    need[2] = h->centered;
    break;
  case FSO_ADAGRAD:
    u.kind = FSB_UPD_ADAGRAD;
    need[0] = true;
    fill = h->initial_accumulator_value;
    break;
  case FSO_ADADELTA:
    u.kind = FSB_UPD_ADADELTA;
    need[0] = need[1] = true;
    break;
  }
  fs_tensor **slots[3] = {&o->buf0[i], &o->buf1[i], &o->buf2[i]};
  for (int k = 0; k < 3; k++)
    if (need[k] && !(st[k] = state(slots[k], p, fill))) return -1;
  u.step = ++o->steps[i];
  if (o->kind == FSO_ADAGRAD) u.lr = h->lr / (1 + ((double)u.step - 1) * h->lr_decay);
  if (fsT_is_low(p->dtype)) return step_low(p, st, &u);
  if (p->dtype == FS_F64) { /* 64-true: one device or DDP (the connector refuses sharding) */
    if (p->grad->dtype != FS_F64 && fsT_set_dtype(p->grad, FS_F64) < 0) return -1;
    double *s64[3] = {st[0] ? fsT_f64(st[0]) : NULL, st[1] ? fsT_f64(st[1]) : NULL, st[2] ? fsT_f64(st[2]) : NULL};
    return fsO_update_f64(&u, be, fsT_f64(p), fsT_f64(p->grad), s64);
  }
  float *w = fsT_f32(p), *g = fsT_f32(p->grad), *s0 = st[0] ? fsT_f32(st[0]) : NULL;
  float *s1 = st[1] ? fsT_f32(st[1]) : NULL, *s2 = st[2] ? fsT_f32(st[2]) : NULL;
  switch (u.kind) {
  case FSB_UPD_SGD:
    be->sgd_update(u.n, w, g, s0, u.first, u.lr, u.momentum, u.dampening, u.wd, u.nesterov, u.maximize);
    break;
  case FSB_UPD_ADAM:
    be->adam_update(u.n, w, g, s0, s1, s2, u.lr, u.beta1, u.beta2, u.eps, u.wd, u.decoupled, u.maximize,
                    u.step);
    break;
  case FSB_UPD_RMSPROP:
    be->rmsprop_update(u.n, w, g, s0, s2, s1, u.lr, u.alpha, u.eps, u.wd, u.momentum, u.maximize);
    break;
  case FSB_UPD_ADAGRAD:
    be->adagrad_update(u.n, w, g, s0, u.lr, u.eps, u.wd, u.maximize);
    break;
  case FSB_UPD_ADADELTA:
    be->adadelta_update(u.n, w, g, s0, s1, u.lr, u.rho, u.eps, u.wd, u.maximize);
    break;
  }
  return 0;
}

int fsO_step(fs_optim *o) {
  for (int64_t k = 0; k < o->ngroups; k++) {
    const fsO_group *gr = &o->groups[k];
    for (int64_t i = gr->first; i < gr->first + gr->n; i++) {
      fs_tensor *p = o->params[i];
      if (!p->grad) continue;
      if (!p->data) {
        fsT_seterr("optimizer step: a parameter is on the meta device");
        return -1;
      }
      if (step_param(o, i, &gr->h) < 0) return -1;
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

/* p's gradient with float32 storage, for clipping to work on in place (a
 * low-precision parameter's has the parameter's type: widened exactly);
 * grad_stored gives it the parameter's type again, rounding as torch's
 * grad.mul_ in that type does. */
static fs_tensor *grad_f32(fs_tensor *p) {
  if (p->grad && p->grad->dtype != FS_F32 && fsT_set_dtype(p->grad, FS_F32) < 0) return NULL;
  return p->grad;
}

static int grad_stored(fs_tensor *p) {
  return p->grad && p->dtype != p->grad->dtype ? fsT_set_dtype(p->grad, p->dtype) : 0;
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
  if (fsO_grads_f64(params, n)) return fsO_clip_norm_f64(params, n, max_norm, inf, total);
  /* per-tensor norms in float, then their norm, as torch.norm(stack(norms)) */
  float acc = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    fs_tensor *g = grad_f32(params[i]);
    if (!g) return -1;
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
    if (grad_stored(params[i]) < 0) return -1;
  }
  *total = tn;
  return 0;
}

int fsO_clip_grad_value(fs_tensor *const *params, int64_t n, double clip) {
  if (fsO_grads_f64(params, n)) return fsO_clip_value_f64(params, n, clip);
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) continue;
    fs_tensor *g = grad_f32(params[i]);
    if (!g) return -1;
    fsB_of(g)->clamp((size_t)g->numel, (float)-clip, (float)clip, fsT_f32(g));
    if (grad_stored(params[i]) < 0) return -1;
  }
  return 0;
}
