/* lib_optim.c -- Optimizer values: SGD, Adam, AdamW over
 * runtime/model/optim.h, with torch 1.13's defaults and argument checks.
 * Each remembers whether it was made over meta parameters (Fabric's rules). */
#include <string.h>

#include "eval_int.h"

/* ---- optimizers ------------------------------------------------------------------ */



static void optv_free(void *p) {
  optv *ov = p;
  fsO_release(ov->o);
  free(ov);
}

/* The tensors of a parameters argument (any iterable of tensors). */
static fs_tensor **param_array(fsE_ctx *E, fs_value *params, int64_t *n, bool *meta) {
  fsE_iter it;
  fs_value *l = fsV_list(0), *x;
  int st = l && fsE_iter_begin(E, params, &it) == 0 ? 1 : -1;
  while (st == 1 && (st = fsE_iter_next(E, &it, &x)) == 1) fsV_list_append(l, x);
  fsE_iter_end(&it);
  if (st < 0) {
    fsV_release(l);
    return NULL;
  }
  if (!l) return NULL;
  fs_tensor **ts = malloc((l->u.seq.n + 1) * sizeof *ts);
  *n = 0;
  *meta = false;
  for (size_t i = 0; ts && i < l->u.seq.n; i++) {
    fs_tensor *t = fsE_as_tensor(l->u.seq.items[i]);
    if (!t) {
      fsV_seterr("optimizer got a %s where a parameter tensor was expected", fsV_type_name(l->u.seq.items[i]));
      free(ts);
      ts = NULL;
      break;
    }
    *meta |= E->opt->plan ? E->device == FS_DEV_META : t->device == FS_DEV_META;
    ts[(*n)++] = t;
  }
  if (ts && *n == 0) {
    fsV_seterr("optimizer got an empty parameter list");
    free(ts);
    ts = NULL;
  }
  fsV_release(l);
  return ts;
}

static fs_value *optim_value(fs_optim *o, const char *cls, bool meta) {
  if (!o) return fsE_rt_fail();
  optv *ov = calloc(1, sizeof *ov);
  if (!ov) {
    fsO_release(o);
    fsV_seterr("out of memory");
    return NULL;
  }
  ov->o = o;
  ov->cls = cls;
  ov->st.meta_params = meta;
  return fsV_obj(&fsE_optim_class, ov);
}

static int betas(const fs_value *v, double *b1, double *b2) {
  if (v->u.seq.n != 2 || !fsV_is_number(v->u.seq.items[0]) || !fsV_is_number(v->u.seq.items[1])) {
    fsV_seterr("betas must be a pair of numbers");
    return -1;
  }
  *b1 = fsV_to_double(v->u.seq.items[0]);
  *b2 = fsV_to_double(v->u.seq.items[1]);
  return 0;
}

NATIVE(o_sgd) {
  int64_t n;
  bool meta;
  fs_tensor **ps = param_array(E, s[0], &n, &meta);
  if (!ps) return NULL;
  fs_optim *o = fsO_sgd(ps, n, fsV_to_double(s[1]), fsV_to_double(s[2]), fsV_to_double(s[3]),
                        fsV_to_double(s[4]), fsV_truthy(s[5]));
  free(ps);
  return optim_value(o, "SGD", meta);
}

static fs_value *adam(fsE_ctx *E, fs_value **s, bool decoupled) {
  int64_t n;
  bool meta;
  double b1, b2;
  if (betas(s[2], &b1, &b2) < 0) return NULL;
  fs_tensor **ps = param_array(E, s[0], &n, &meta);
  if (!ps) return NULL;
  fs_optim *o = fsO_adam(ps, n, decoupled, fsV_to_double(s[1]), b1, b2, fsV_to_double(s[3]),
                         fsV_to_double(s[4]));
  free(ps);
  return optim_value(o, decoupled ? "AdamW" : "Adam", meta);
}

NATIVE(o_adam) { return adam(E, s, false); }
NATIVE(o_adamw) { return adam(E, s, true); }

/* ---- methods and attributes (rows of the sig table's "Optimizer." entries) ---- */

#define OPTV(self) ((optv *)(self)->u.obj.data)

NATIVE(optim_step) { return fsO_step(OPTV(self)->o) < 0 ? fsE_rt_fail() : fsV_none(); }

NATIVE(optim_zero_grad) {
  fsO_zero_grad(OPTV(self)->o);
  return fsV_none();
}

NATIVE(optim_lr) { return fsV_float(OPTV(self)->o->lr); }

static int optim_setattr(fsE_ctx *E, fs_value *v, const char *name, fs_value *x) {
  optv *ov = v->u.obj.data;
  if (strcmp(name, "lr") != 0) {
    fsV_seterr("'%s' object attribute '%s' cannot be set", ov->cls, name);
    return -1;
  }
  if (!fsV_is_number(x) || fsV_to_double(x) < 0) {
    fsV_seterr("optimizer.lr must be a non-negative number");
    return -1;
  }
  ov->o->lr = fsV_to_double(x);
  return 0;
}

static char *optim_repr(fs_value *v) {
  optv *ov = v->u.obj.data;
  fsV_buf b = {0};
  char lr[40];
  fsV_float_repr(ov->o->lr, lr, sizeof lr);
  fsV_buf_printf(&b, "%s(lr=%s)", ov->cls, lr);
  return fsV_buf_take(&b);
}

const fsV_class fsE_optim_class = {
  .name = "Optimizer", .setattr = optim_setattr, .repr = optim_repr, .free = optv_free,
};

static const fsE_reg optim_funcs[] = {
  {"SGD", o_sgd}, {"Adam", o_adam}, {"AdamW", o_adamw},
  {"Optimizer.step", optim_step}, {"Optimizer.zero_grad", optim_zero_grad}, {"Optimizer.lr", optim_lr},
  {NULL, NULL},
};
const fsE_lib fsE_lib_optim = {"optim", optim_funcs};
