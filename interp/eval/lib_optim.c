/* lib_optim.c -- Optimizer values: SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta over
 * runtime/model/optim.h, with torch 1.13's constructors (sig rows in
 * lang/signatures.c), param_groups, add_param_group and state_dict.
 *
 * The rule: as in torch, an optimizer's param_groups is a list of dicts and
 * those dicts are where its hyper-parameters live.  `opt.param_groups`
 * returns that same list, so `g["lr"] = x` on one of its dicts (a script's,
 * a scheduler's) is what the next step uses: fsE_optim_sync reads every
 * group dict into the runtime's fsO_group before each step.  A group's
 * "params" list is the runtime's parameters; changing it is refused
 * (add_param_group adds parameters).  Each optimizer remembers whether it was
 * made over meta parameters (Fabric's rules, fabric.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"
#include "eval_int.h"

/* d[key] = v; takes v (released on failure) */
static int set_key(fs_value *d, const char *key, fs_value *v) { /* takes v */
  fs_value *k = v ? fsV_cstr(key) : NULL;
  int rc = k ? fsV_dict_set(d, k, v) : (fsV_release(v), -1);
  fsV_release(k);
  return rc;
}

/* ---- group dicts <-> fsO_hyper ------------------------------------------------ */

/* The hyper-parameters a group dict may hold: torch's keys.  'n' number,
 * 'b' bool, '2' the betas pair. */
static const struct { const char *key; char type; size_t off; } hyper_keys[] = {
  {"lr", 'n', offsetof(fsO_hyper, lr)},
  {"weight_decay", 'n', offsetof(fsO_hyper, weight_decay)},
  {"momentum", 'n', offsetof(fsO_hyper, momentum)},
  {"dampening", 'n', offsetof(fsO_hyper, dampening)},
  {"nesterov", 'b', offsetof(fsO_hyper, nesterov)},
  {"betas", '2', offsetof(fsO_hyper, beta1)},
  {"amsgrad", 'b', offsetof(fsO_hyper, amsgrad)},
  {"eps", 'n', offsetof(fsO_hyper, eps)},
  {"alpha", 'n', offsetof(fsO_hyper, alpha)},
  {"centered", 'b', offsetof(fsO_hyper, centered)},
  {"lr_decay", 'n', offsetof(fsO_hyper, lr_decay)},
  {"initial_accumulator_value", 'n', offsetof(fsO_hyper, initial_accumulator_value)},
  {"rho", 'n', offsetof(fsO_hyper, rho)},
  {"maximize", 'b', offsetof(fsO_hyper, maximize)},
};

/* Reads the keys of `defaults` that are hyper-parameters from dict d (group
 * gi, or the constructor's arguments when gi < 0) into *h. */
static int read_hyper(const fs_value *defaults, const fs_value *d, int64_t gi, fsO_hyper *h) {
  char where[48];
  if (gi < 0) snprintf(where, sizeof where, "the optimizer's");
  else snprintf(where, sizeof where, "param_groups[%lld]", (long long)gi);
  for (size_t k = 0; k < sizeof hyper_keys / sizeof *hyper_keys; k++) {
    if (!fsV_dict_getstr(defaults, hyper_keys[k].key)) continue; /* not this optimizer's */
    const fs_value *v = fsV_dict_getstr(d, hyper_keys[k].key);
    double *f = (double *)((char *)h + hyper_keys[k].off);
    if (!v) {
      fsV_seterr("%s has no '%s'", where, hyper_keys[k].key);
      return -1;
    }
    switch (hyper_keys[k].type) {
    case 'b': *(bool *)((char *)h + hyper_keys[k].off) = fsV_truthy(v); break;
    case 'n':
      if (!fsV_is_number(v)) {
        fsV_seterr("%s '%s' must be a number, not %s", where, hyper_keys[k].key, fsV_type_name(v));
        return -1;
      }
      *f = fsV_to_double(v);
      break;
    default: /* betas */
      if ((v->type != FSV_TUPLE && v->type != FSV_LIST) || v->u.seq.n != 2 || !fsV_is_number(v->u.seq.items[0]) ||
          !fsV_is_number(v->u.seq.items[1])) {
        fsV_seterr("%s 'betas' must be a pair of numbers", where);
        return -1;
      }
      h->beta1 = fsV_to_double(v->u.seq.items[0]);
      h->beta2 = fsV_to_double(v->u.seq.items[1]);
    }
  }
  return 0;
}

int fsE_optim_sync(optv *ov) {
  fs_value *gl = ov->groups;
  if (gl->type != FSV_LIST || (int64_t)gl->u.seq.n != ov->o->ngroups) {
    fsV_seterr("param_groups was changed; add a group with add_param_group");
    return -1;
  }
  for (int64_t k = 0; k < ov->o->ngroups; k++) {
    fs_value *g = gl->u.seq.items[k];
    fsO_group *rg = &ov->o->groups[k];
    const fs_value *ps = g->type == FSV_DICT ? fsV_dict_getstr(g, "params") : NULL;
    bool same = ps && ps->type == FSV_LIST && (int64_t)ps->u.seq.n == rg->n;
    for (int64_t i = 0; same && i < rg->n; i++) same = fsE_as_tensor(ps->u.seq.items[i]) == ov->o->params[rg->first + i];
    if (!same) {
      fsV_seterr("param_groups[%lld]['params'] was changed; add parameters with add_param_group", (long long)k);
      return -1;
    }
    if (read_hyper(ov->defaults, g, k, &rg->h) < 0) return -1;
  }
  return 0;
}

/* Points group 0's "params" at the runtime's parameters again (after FSDP's
 * setup swapped them for flat shards). */
int fsE_optim_params_swapped(optv *ov) {
  fs_value *l = fsV_list((size_t)ov->o->nparams);
  for (int64_t i = 0; l && i < ov->o->nparams; i++)
    if (fsV_list_append(l, fsE_tensor_value(fsT_retain(ov->o->params[i]))) < 0) {
      fsV_release(l);
      l = NULL;
    }
  fs_value *k = l ? fsV_cstr("params") : NULL;
  int rc = k ? fsV_dict_set(ov->groups->u.seq.items[0], k, l) : (fsV_release(l), -1);
  fsV_release(k);
  return rc;
}

/* ---- construction ----------------------------------------------------------------- */

static void optv_free(void *p) {
  optv *ov = p;
  fsO_release(ov->o);
  fsV_release(ov->groups);
  fsV_release(ov->defaults);
  free(ov);
}

/* The items of an iterable as a new list. */
static fs_value *items_of(fsE_ctx *E, fs_value *v) {
  fsE_iter it;
  fs_value *l = fsV_list(0), *x;
  int st = l && fsE_iter_begin(E, v, &it) == 0 ? 1 : -1;
  while (st == 1 && (st = fsE_iter_next(E, &it, &x)) == 1) fsV_list_append(l, x);
  if (l) fsE_iter_end(&it);
  if (st < 0) {
    fsV_release(l);
    return NULL;
  }
  return l;
}

/* add_param_group(group): torch's Optimizer.add_param_group over dict g
 * (kept, as torch keeps the caller's dict): "params" becomes a list of
 * tensors, missing hyper-parameters come from the defaults. */
static int add_group(fsE_ctx *E, optv *ov, fsO_kind kind, fs_value *g) {
  fs_value *ps = fsV_dict_getstr(g, "params"), *list;
  if (!ps) {
    fsV_seterr("param group has no 'params'");
    return -1;
  }
  if (fsE_as_tensor(ps)) {
    if ((list = fsV_list(1))) fsV_list_append(list, fsV_retain(ps));
  } else {
    list = items_of(E, ps);
  }
  fs_value *key = list ? fsV_cstr("params") : NULL;
  if (!key || fsV_dict_set(g, key, list) < 0) {
    if (!key) fsV_release(list);
    fsV_release(key);
    return -1;
  }
  fsV_release(key);
  fs_tensor **ts = malloc((list->u.seq.n + 1) * sizeof *ts);
  if (!ts) return fsV_seterr("out of memory"), -1;
  int64_t n = (int64_t)list->u.seq.n;
  for (int64_t i = 0; i < n; i++) {
    if (!(ts[i] = fsE_as_tensor(list->u.seq.items[i]))) {
      fsV_seterr("optimizer can only optimize Tensors, but one of the params is %s", fsV_type_name(list->u.seq.items[i]));
      free(ts);
      return -1;
    }
    ov->st.meta_params |= E->opt->plan ? E->device == FS_DEV_META : ts[i]->device == FS_DEV_META;
  }
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < ov->defaults->u.dict.n; i++) { /* setdefault */
    fs_value *dk = ov->defaults->u.dict.keys[i], *dv = ov->defaults->u.dict.vals[i];
    if (!fsV_dict_get(g, dk)) rc = fsV_dict_set(g, dk, fsV_retain(dv));
  }
  fsO_hyper h = {0};
  if (rc == 0) rc = read_hyper(ov->defaults, g, ov->groups->u.seq.n, &h);
  if (rc == 0) {
    if (ov->o) rc = fsO_add_group(ov->o, ts, n, &h);
    else rc = (ov->o = fsO_new(kind, ts, n, &h)) ? 0 : -1;
    if (rc < 0) fsE_rt_fail();
  }
  free(ts);
  return rc == 0 ? fsV_list_append(ov->groups, fsV_retain(g)) : -1;
}

/* SGD(params, lr, ...), Adam(...) ...: slots are the sig row's parameters,
 * which are torch's keyword names; they become the defaults dict. */
static fs_value *make_optim(fsE_ctx *E, fs_value **s, fsO_kind kind, const char *cls) {
  if (fsE_as_tensor(s[0])) {
    fsV_seterr("params argument given to the optimizer should be an iterable of Tensors or dicts, but got Tensor");
    return NULL;
  }
  const fsSig *sig = fsSig_find(cls);
  optv *ov = calloc(1, sizeof *ov);
  fs_value *v = ov ? fsV_obj(&fsE_optim_class, ov) : NULL, *groups = NULL;
  if (!v) return ov ? NULL : (fsV_seterr("out of memory"), NULL);
  ov->cls = cls;
  if (!(ov->groups = fsV_list(1)) || !(ov->defaults = fsV_dict())) goto fail;
  for (size_t i = 1; i < sig->nparams; i++) {
    fs_value *k = fsV_cstr(sig->params[i].name);
    int rc = k ? fsV_dict_set(ov->defaults, k, fsV_retain(s[i])) : -1;
    fsV_release(k);
    if (rc < 0) goto fail;
  }
  fsO_hyper h = fsO_defaults(kind);
  if (read_hyper(ov->defaults, ov->defaults, -1, &h) < 0) goto fail;
  if (fsO_check(kind, &h) < 0) {
    fsE_rt_fail();
    goto fail;
  }
  if (!(groups = items_of(E, s[0]))) goto fail;
  if (groups->u.seq.n == 0) {
    fsV_seterr("optimizer got an empty parameter list");
    goto fail;
  }
  if (groups->u.seq.items[0]->type != FSV_DICT) { /* a list of tensors: one group */
    fs_value *g = fsV_dict();
    if (!g) goto fail;
    int rc = set_key(g, "params", groups);
    groups = rc == 0 ? fsV_list(1) : NULL;
    if (!groups) {
      fsV_release(g);
      goto fail;
    }
    if (fsV_list_append(groups, g) < 0) goto fail;
  }
  for (size_t i = 0; i < groups->u.seq.n; i++) {
    fs_value *g = groups->u.seq.items[i];
    if (g->type != FSV_DICT) {
      fsV_seterr("param group must be a dict, not %s", fsV_type_name(g));
      goto fail;
    }
    if (add_group(E, ov, kind, g) < 0) goto fail;
  }
  fsV_release(groups);
  return v;
fail:
  fsV_release(groups);
  fsV_release(v);
  return NULL;
}

NATIVE(optim_sgd) { return make_optim(E, s, FSO_SGD, "SGD"); }
NATIVE(optim_adam) { return make_optim(E, s, FSO_ADAM, "Adam"); }
NATIVE(optim_adamw) { return make_optim(E, s, FSO_ADAMW, "AdamW"); }
NATIVE(optim_rmsprop) { return make_optim(E, s, FSO_RMSPROP, "RMSprop"); }
NATIVE(optim_adagrad) { return make_optim(E, s, FSO_ADAGRAD, "Adagrad"); }
NATIVE(optim_adadelta) { return make_optim(E, s, FSO_ADADELTA, "Adadelta"); }

/* ---- methods and attributes (rows of the sig table's "Optimizer." entries) ---- */

#define OPTV(self) ((optv *)(self)->u.obj.data)

/* step(closure=None): the closure's loss, as torch returns it */
NATIVE(optim_step) {
  fs_value *loss = NULL;
  if (s[0]->type != FSV_NONE) {
    fsV_args none = {NULL, 0, NULL, NULL, 0, a->loc};
    if (!(loss = fsE_call(E, s[0], &none))) return NULL;
  }
  int rc = fsE_optim_sync(OPTV(self));
  /* a set-up optimizer steps through Fabric's precision plugin: under
   * 16-mixed, scaler.step (skipped on inf/NaN gradients) then scaler.update */
  fabv *fv = OPTV(self)->st.wrapped && E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  if (rc == 0 && fv && fv->scaling) {
    bool stepped;
    if (fsO_scaler_step(&fv->scaler, OPTV(self)->o, &stepped) < 0) rc = (fsE_rt_fail(), -1);
    else fsO_scaler_update(&fv->scaler, OPTV(self)->o);
  } else if (rc == 0 && fsO_step(OPTV(self)->o) < 0)
    rc = (fsE_rt_fail(), -1);
  if (rc < 0) {
    fsV_release(loss);
    return NULL;
  }
  return loss ? loss : fsV_none();
}

NATIVE(optim_zero_grad) {
  fsO_zero_grad(OPTV(self)->o);
  return fsV_none();
}

NATIVE(optim_lr) { /* the first group's, which `opt.lr = x` sets in every group */
  if (fsE_optim_sync(OPTV(self)) < 0) return NULL;
  return fsV_float(OPTV(self)->o->groups[0].h.lr);
}

NATIVE(optim_param_groups) { return fsV_retain(OPTV(self)->groups); }
NATIVE(optim_defaults) { return fsV_retain(OPTV(self)->defaults); }

NATIVE(optim_add_param_group) {
  optv *ov = OPTV(self);
  return add_group(E, ov, ov->o->kind, s[0]) < 0 ? NULL : fsV_none();
}

/* Parameter i's entry of state_dict()["state"] as torch 1.13 makes it:
 * "step" (a float32 scalar tensor; an int for RMSprop and Adadelta; none for SGD), then
 * the buffers fsO_state_name names (SGD's momentum_buffer None when it has
 * none); the tensors are the live ones.  1 and *out, 0 when i has no state
 * yet (torch makes it at the first step), -1 + fsV_error. */
int fsE_optim_param_state(const fs_optim *o, int64_t i, fs_value **out) {
  fs_tensor *bufs[3] = {o->buf0[i], o->buf1[i], o->buf2[i]};
  *out = NULL;
  if (!o->steps[i] && !bufs[0]) return 0;
  fs_value *ps = fsV_dict();
  int rc = ps ? 0 : -1;
  if (rc == 0 && (o->kind == FSO_RMSPROP || o->kind == FSO_ADADELTA))
    rc = set_key(ps, "step", fsV_int(o->steps[i]));
  else if (rc == 0 && o->kind != FSO_SGD) rc = set_key(ps, "step", fsE_tensor_value(fsT_scalar((float)o->steps[i])));
  for (int w = 0; rc == 0 && w < 3; w++) {
    const char *name = fsO_state_name(o->kind, w);
    if (name && bufs[w]) rc = set_key(ps, name, fsE_tensor_value(fsT_retain(bufs[w])));
    else if (name && o->kind == FSO_SGD) rc = set_key(ps, name, fsV_none()); /* torch: None without momentum */
  }
  if (rc == 0) return *out = ps, 1;
  fsV_release(ps);
  return -1;
}

/* state_dict(): torch's layout {"state": {index: {...}}, "param_groups": [...]}
 * with parameters as their indices; the state's tensors are the live ones,
 * as torch's are. */
NATIVE(optim_state_dict) {
  optv *ov = OPTV(self);
  fs_optim *o = ov->o;
  if (fsE_optim_sync(ov) < 0) return NULL;
  fs_value *sd = fsV_dict(), *state = fsV_dict(), *groups = fsV_list((size_t)o->ngroups);
  int rc = sd && state && groups ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < o->nparams; i++) {
    fs_value *ps = NULL, *idx = NULL;
    int has = fsE_optim_param_state(o, i, &ps);
    rc = has < 0 || (has && !(idx = fsV_int(i))) ? -1 : 0;
    if (rc == 0 && has) rc = fsV_dict_set(state, idx, ps), ps = NULL;
    fsV_release(ps);
    fsV_release(idx);
  }
  for (int64_t k = 0; rc == 0 && k < o->ngroups; k++) {
    fs_value *g = ov->groups->u.seq.items[k], *pg = fsV_dict(), *ix = fsV_list((size_t)o->groups[k].n);
    rc = pg && ix ? 0 : -1;
    for (size_t j = 0; rc == 0 && j < g->u.dict.n; j++)
      if (strcmp(g->u.dict.keys[j]->u.str.s, "params"))
        rc = fsV_dict_set(pg, g->u.dict.keys[j], fsV_retain(g->u.dict.vals[j]));
    for (int64_t i = 0; rc == 0 && i < o->groups[k].n; i++) rc = fsV_list_append(ix, fsV_int(o->groups[k].first + i));
    if (rc == 0) rc = set_key(pg, "params", ix), ix = NULL;
    fsV_release(ix);
    if (rc == 0) rc = fsV_list_append(groups, pg), pg = NULL;
    fsV_release(pg);
  }
  if (rc == 0) rc = set_key(sd, "state", state), state = NULL;
  if (rc == 0) rc = set_key(sd, "param_groups", groups), groups = NULL;
  if (rc == 0) return sd;
  fsV_release(sd);
  fsV_release(state);
  fsV_release(groups);
  return NULL;
}

/* ---- loading a state, staged --------------------------------------------------- */

/* A load never leaves an optimizer half-loaded: the saved groups go into
 * copies of the live group dicts and the saved state into new steps and
 * buffers (fsE_optim_load); fsE_optim_load_check validates all of it, and
 * only then fsE_optim_load_apply installs it, which cannot fail. */

int fsE_optim_load_begin(fsE_optim_load *L, optv *ov) {
  fs_optim *o = ov->o;
  size_t n = (size_t)o->nparams, ng = (size_t)o->ngroups;
  memset(L, 0, sizeof *L);
  L->ov = ov;
  L->steps = calloc(n + 1, sizeof *L->steps);
  L->stated = calloc(n + 1, sizeof *L->stated);
  L->bufs = calloc(3 * n + 1, sizeof *L->bufs);
  L->groups = calloc(ng + 1, sizeof *L->groups);
  L->hyper = calloc(ng + 1, sizeof *L->hyper);
  int rc = L->steps && L->stated && L->bufs && L->groups && L->hyper ? 0 : -1;
  for (size_t k = 0; rc == 0 && k < ng; k++) {
    const fs_value *live = ov->groups->u.seq.items[k];
    rc = live->type == FSV_DICT && (L->groups[k] = fsV_dict()) ? 0 : -1;
    for (size_t e = 0; rc == 0 && e < live->u.dict.n; e++)
      rc = fsV_dict_set(L->groups[k], live->u.dict.keys[e], fsV_retain(live->u.dict.vals[e]));
  }
  if (rc == 0) return 0;
  if (!fsV_error()[0]) fsV_seterr("out of memory");
  fsE_optim_load_abort(L);
  return -1;
}

void fsE_optim_load_abort(fsE_optim_load *L) {
  if (!L->ov) return;
  for (int64_t i = 0; L->bufs && i < 3 * L->ov->o->nparams; i++) fsT_release(L->bufs[i]);
  for (int64_t k = 0; L->groups && k < L->ov->o->ngroups; k++) fsV_release(L->groups[k]);
  free(L->steps);
  free(L->stated);
  free(L->bufs);
  free(L->groups);
  free(L->hyper);
  memset(L, 0, sizeof *L);
}

/* Saved group g of param_groups: a list, or a dict keyed "0", "1", ... as
 * the safetensors layout reads back; NULL when absent. */
static const fs_value *saved_group(const fs_value *groups, int64_t g) {
  char gi[24];
  snprintf(gi, sizeof gi, "%lld", (long long)g);
  if (groups->type == FSV_DICT) return fsV_dict_getstr(groups, gi);
  return (groups->type == FSV_LIST || groups->type == FSV_TUPLE) && g < (int64_t)groups->u.seq.n ? groups->u.seq.items[g] : NULL;
}

int fsE_optim_load_groups(fsE_optim_load *L, const fs_value *groups, int64_t size) {
  fs_optim *o = L->ov->o;
  int64_t n = groups->type == FSV_DICT ? (int64_t)groups->u.dict.n
            : groups->type == FSV_LIST || groups->type == FSV_TUPLE ? (int64_t)groups->u.seq.n : -1;
  if (n != o->ngroups) return fsV_seterr("loaded state dict has a different number of parameter groups"), -1;
  for (int64_t g = 0; g < o->ngroups; g++) {
    const fs_value *d = saved_group(groups, g), *ps = d && d->type == FSV_DICT ? fsV_dict_getstr(d, "params") : NULL;
    if (!ps || (ps->type != FSV_LIST && ps->type != FSV_TUPLE) || (int64_t)ps->u.seq.n != (size < 0 ? o->groups[g].n : size))
      return fsV_seterr("loaded state dict contains a parameter group that doesn't match the size of optimizer's group"), -1;
  }
  for (int64_t g = 0; g < o->ngroups; g++) {
    const fs_value *d = saved_group(groups, g);
    for (size_t e = 0; e < d->u.dict.n; e++)
      if (d->u.dict.keys[e]->type == FSV_STR && strcmp(d->u.dict.keys[e]->u.str.s, "params") &&
          fsV_dict_set(L->groups[g], d->u.dict.keys[e], fsV_retain(d->u.dict.vals[e])) < 0)
        return -1;
  }
  return 0;
}

/* Which of the kind's buffers (fsO_state_name) a stepped parameter of a
 * group with hyper-parameters h has, as torch's first step creates them;
 * SGD's momentum_buffer may be None in torch's own state, so it never is. */
static bool state_needed(fsO_kind kind, const fsO_hyper *h, int w) {
  switch (kind) {
  case FSO_SGD: return false;
  case FSO_ADAM:
  case FSO_ADAMW: return w < 2 || h->amsgrad;
  case FSO_RMSPROP: return w == 0 || (w == 1 && h->momentum > 0) || (w == 2 && h->centered);
  case FSO_ADADELTA: return w < 2;
  default: return w == 0;
  }
}

fs_tensor *fsE_optim_load_slot(fsE_optim_load *L, int64_t i, const char *name) {
  fs_optim *o = L->ov->o;
  for (int w = 0; w < 3; w++) {
    const char *sn = fsO_state_name(o->kind, w);
    if (!sn || strcmp(sn, name)) continue;
    fs_tensor **slot = &L->bufs[3 * i + w], *p = o->params[i];
    /* torch casts a loaded state to its parameter's dtype: a float64
     * parameter's states stay float64 (its update writes doubles); the
     * others are float32, as FSDP's staged shards write them */
    fs_dtype dt = p->dtype == FS_F64 ? FS_F64 : FS_F32;
    if (!*slot && !(*slot = fsT_zeros(dt, p->device, p->rank, p->shape))) return fsE_rt_fail(), NULL;
    L->stated[i] |= FSE_STATED;
    return *slot;
  }
  fsV_seterr("optimizer state %lld: '%s' is not a state of %s", (long long)i, name, L->ov->cls);
  return NULL;
}

int fsE_optim_load_step(fsE_optim_load *L, int64_t i, const fs_value *v) {
  fs_tensor *t = fsE_as_tensor(v);
  double step = -1;
  if (t && t->numel == 1 && fsG_item(t, &step) < 0) return fsE_rt_fail(), -1;
  if (!t && fsV_is_number(v) && v->type != FSV_BOOL) step = fsV_to_double(v);
  if (!(step >= 0 && step <= 9007199254740992.0 && step == (double)(int64_t)step)) {
    char *r = fsV_repr(v);
    fsV_seterr("optimizer state %lld: 'step' must be a non-negative integer, got %s", (long long)i, r ? r : "?");
    free(r);
    return -1;
  }
  L->steps[i] = (int64_t)step;
  L->stated[i] |= FSE_STATED | FSE_STEPPED;
  return 0;
}

int fsE_optim_load_entry(fsE_optim_load *L, int64_t i, const char *name, const fs_value *v) {
  fs_optim *o = L->ov->o;
  if (!strcmp(name, "step")) return fsE_optim_load_step(L, i, v);
  bool known = false;
  for (int w = 0; w < 3; w++) known |= fsO_state_name(o->kind, w) && !strcmp(fsO_state_name(o->kind, w), name);
  if (!known) return 0; /* a key this optimizer does not keep: torch keeps it, never uses it */
  if (v->type == FSV_NONE && o->kind == FSO_SGD) return L->stated[i] |= FSE_STATED, 0; /* torch: None without momentum */
  fs_tensor *t = fsE_as_tensor(v), *p = o->params[i];
  if (!t || !fsT_same_shape(t, p) || !t->data) {
    char a[64], b[64];
    fsV_seterr("optimizer state %lld: '%s' must be a tensor of shape %s, got %s", (long long)i, name,
               fsT_shape_str(p, b, sizeof b), t ? fsT_shape_str(t, a, sizeof a) : fsV_type_name(v));
    return -1;
  }
  fs_tensor *slot = fsE_optim_load_slot(L, i, name), *conv = slot ? fsT_to_dtype(t, slot->dtype) : NULL;
  int rc = conv && fsB_transfer(slot->device, slot->data, conv->device, conv->data, fsT_nbytes(slot)) == 0 ? 0 : -1;
  fsT_release(conv);
  return rc < 0 ? (slot ? fsE_rt_fail() : NULL, -1) : 0;
}

int fsE_optim_load_check(fsE_optim_load *L) {
  fs_optim *o = L->ov->o;
  for (int64_t k = 0; k < o->ngroups; k++)
    if (read_hyper(L->ov->defaults, L->groups[k], k, &L->hyper[k]) < 0) return -1;
  for (int64_t k = 0; k < o->ngroups; k++)
    for (int64_t i = o->groups[k].first; i < o->groups[k].first + o->groups[k].n; i++) {
      if (!L->stated[i]) continue;
      if (o->kind != FSO_SGD && !(L->stated[i] & FSE_STEPPED)) /* every kind but SGD saves a step */
        return fsV_seterr("optimizer state %lld has no 'step'", (long long)i), -1;
      for (int w = 0; w < 3; w++)
        if (state_needed(o->kind, &L->hyper[k], w) && !L->bufs[3 * i + w])
          return fsV_seterr("optimizer state %lld has no '%s'", (long long)i, fsO_state_name(o->kind, w)), -1;
    }
  return 0;
}

void fsE_optim_load_apply(fsE_optim_load *L) {
  optv *ov = L->ov;
  fs_optim *o = ov->o;
  for (int64_t i = 0; i < o->nparams; i++) { /* torch replaces the whole state */
    fs_tensor **live[3] = {&o->buf0[i], &o->buf1[i], &o->buf2[i]};
    for (int w = 0; w < 3; w++) {
      fsT_release(*live[w]);
      *live[w] = L->bufs[3 * i + w];
      L->bufs[3 * i + w] = NULL;
    }
    o->steps[i] = L->steps[i];
  }
  for (int64_t k = 0; k < o->ngroups; k++) { /* the live dicts stay the same objects: their items swap */
    fs_value *live = ov->groups->u.seq.items[k];
    fs_value *copy = L->groups[k], **keys = live->u.dict.keys, **vals = live->u.dict.vals;
    size_t n = live->u.dict.n, cap = live->u.dict.cap;
    live->u.dict.keys = copy->u.dict.keys, live->u.dict.vals = copy->u.dict.vals;
    live->u.dict.n = copy->u.dict.n, live->u.dict.cap = copy->u.dict.cap;
    copy->u.dict.keys = keys, copy->u.dict.vals = vals, copy->u.dict.n = n, copy->u.dict.cap = cap;
    o->groups[k].h = L->hyper[k];
  }
  fsE_optim_load_abort(L);
}

/* load_state_dict(state_dict): torch's checks and words, all before any of
 * it is installed. */
NATIVE(optim_load_state_dict) {
  optv *ov = OPTV(self);
  fs_optim *o = ov->o;
  const fs_value *sd = s[0], *state = fsV_dict_getstr(sd, "state"), *groups = fsV_dict_getstr(sd, "param_groups");
  fsE_optim_load L;
  if (!state || state->type != FSV_DICT || !groups || groups->type != FSV_LIST) {
    fsV_seterr("optimizer state_dict must have 'state' (a dict) and 'param_groups' (a list)");
    return NULL;
  }
  if (fsE_optim_load_begin(&L, ov) < 0) return NULL;
  int rc = fsE_optim_load_groups(&L, groups, -1);
  /* saved index -> parameter, in group order (torch's id_map) */
  for (size_t e = 0; rc == 0 && e < state->u.dict.n; e++) {
    const fs_value *key = state->u.dict.keys[e], *st = state->u.dict.vals[e];
    int64_t i = -1;
    for (int64_t k = 0; i < 0 && key->type == FSV_INT && k < o->ngroups; k++) {
      const fs_value *ps = fsV_dict_getstr(groups->u.seq.items[k], "params");
      for (int64_t j = 0; j < o->groups[k].n; j++)
        if (fsV_equal(ps->u.seq.items[j], key)) i = o->groups[k].first + j;
    }
    if (i < 0 || st->type != FSV_DICT) continue; /* torch keeps such state as is; it is never used */
    for (size_t j = 0; rc == 0 && j < st->u.dict.n; j++)
      if (st->u.dict.keys[j]->type == FSV_STR)
        rc = fsE_optim_load_entry(&L, i, st->u.dict.keys[j]->u.str.s, st->u.dict.vals[j]);
  }
  if (rc == 0) rc = fsE_optim_load_check(&L);
  if (rc < 0) {
    fsE_optim_load_abort(&L);
    return NULL;
  }
  fsE_optim_load_apply(&L);
  return fsV_none();
}

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
  for (size_t k = 0; k < ov->groups->u.seq.n; k++)
    if (ov->groups->u.seq.items[k]->type != FSV_DICT || set_key(ov->groups->u.seq.items[k], "lr", fsV_retain(x)) < 0)
      return -1;
  return fsE_optim_sync(ov);
}

static char *optim_repr(fs_value *v) {
  optv *ov = v->u.obj.data;
  fsV_buf b = {0};
  char lr[40];
  fsV_float_repr(ov->o->groups[0].h.lr, lr, sizeof lr);
  fsV_buf_printf(&b, "%s(lr=%s)", ov->cls, lr);
  return fsV_buf_take(&b);
}

const fsV_class fsE_optim_class = {
  .name = "Optimizer", .setattr = optim_setattr, .repr = optim_repr, .free = optv_free,
};

static const fsE_reg optim_funcs[] = {
  {"SGD", optim_sgd}, {"Adam", optim_adam}, {"AdamW", optim_adamw},
  {"RMSprop", optim_rmsprop}, {"Adagrad", optim_adagrad}, {"Adadelta", optim_adadelta},
  {"Optimizer.step", optim_step}, {"Optimizer.zero_grad", optim_zero_grad}, {"Optimizer.lr", optim_lr},
  {"Optimizer.param_groups", optim_param_groups}, {"Optimizer.defaults", optim_defaults},
  {"Optimizer.add_param_group", optim_add_param_group}, {"Optimizer.state_dict", optim_state_dict},
  {"Optimizer.load_state_dict", optim_load_state_dict},
  {NULL, NULL},
};
const fsE_lib fsE_lib_optim = {"optim", optim_funcs};
