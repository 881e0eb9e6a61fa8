/* lib_ckpt.c -- fabric.save / fabric.load / fabric.load_raw in both
 * checkpoint formats: PyTorch's for a path ending in .pt, .pth or .ckpt
 * (runtime/io/torchckpt.h), safetensors for every other name
 * (runtime/io/safetensors.h). Files are all-or-nothing; FSDP ranks write
 * their slices into one file and read back their slices.
 *
 * One body serves both formats. A save first describes the checkpoint as
 * Lightning's torch checkpoint holds it -- the state with each module
 * replaced by its state_dict() and each optimizer by torch 1.13's
 * optimizer.state_dict() -- as one pickle.h value tree (ckpt). PyTorch's
 * format pickles that tree; safetensors flattens it (ck_flatten). A load
 * opens either file as one ck_file: an index of its tensors by dotted name
 * ("model.fc.weight", "optimizer.state.0.exp_avg"), which fsK_match compares
 * with a module's parameters, and its other values by path. What differs
 * between the formats is only the rows of a ck_format. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "atomicfile.h"
#include "autograd.h"
#include "eval_int.h"
#include "safetensors.h"
#include "torchckpt.h"

/* ---- the checkpoint a save describes ------------------------------------------------ */

/* v (n of *cap elements of size elem used) with room for one more: v itself,
 * or v moved to a doubled block; NULL on OOM (v still valid). */
void *fsE_ck_room(void *v, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return v;
  size_t want = *cap ? 2 * *cap : 16;
  void *w = realloc(v, want * elem);
  if (w) *cap = want;
  return w;
}

void *fsE_ck_own(ckpt *c, void *s) {
  char **o = s ? fsE_ck_room(c->owned, c->nowned, &c->capowned, sizeof *o) : NULL;
  if (!o) {
    free(s);
    return NULL;
  }
  c->owned = o;
  return c->owned[c->nowned++] = s;
}

/* src (nbytes on dev) as host memory the checkpoint can write: src itself on
 * the cpu, else a copy freed with the checkpoint.  NULL + fsV_error on failure. */
static const void *ck_host(ckpt *c, fs_device dev, const void *src, size_t nbytes) {
  if (dev == FS_DEV_CPU) return src;
  char *h = malloc(nbytes ? nbytes : 1);
  if (!h || fsB_transfer(FS_DEV_CPU, h, dev, src, nbytes) < 0) {
    free(h);
    if (h) fsE_rt_fail();
    else fsV_seterr("out of memory");
    return NULL;
  }
  return fsE_ck_own(c, h);
}

char *fsE_ck_fmt(ckpt *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return fsE_ck_own(c, strdup(buf));
}

static void ck_free(ckpt *c) {
  for (size_t i = 0; i < c->nowned; i++) free(c->owned[i]);
  free(c->owned);
  for (size_t i = 0; i < c->nheld; i++) fsV_release(c->held[i]);
  free(c->held);
  free(c->plain);
  free(c->sl);
  free(c->t);
  free(c->tq);
  free(c->m);
  fsQ_free(c->doc);
}

/* v (a new reference, may be NULL) kept alive until c is freed: the
 * checkpoint's tensors point into it.  NULL on OOM (v released). */
static fs_value *ck_hold(ckpt *c, fs_value *v) {
  fs_value **h = v ? fsE_ck_room(c->held, c->nheld, &c->capheld, sizeof *h) : NULL;
  if (!h) {
    fsV_release(v);
    return NULL;
  }
  c->held = h;
  return c->held[c->nheld++] = v;
}

/* The tensor t as a value of the checkpoint (its host copy). */
static fsQ_value *ck_tensor(ckpt *c, const char *name, const fs_tensor *t) {
  if (!t->data) {
    fsV_seterr("cannot save '%s': the tensor is on the %s device", name, fsT_device_name(t->device));
    return NULL;
  }
  const void *data = ck_host(c, t->device, t->data, fsT_nbytes(t));
  return data ? fsQ_tensor_new(c->doc, t->dtype, t->rank, t->shape, data) : NULL;
}

/* A sharded tensor of shape like's: this rank holds count elements from
 * first, at src on dev; the value has no data (every rank writes its slice). */
static fsQ_value *ck_sliced(ckpt *c, const fs_tensor *like, int64_t first, int64_t count, fs_device dev,
                            const float *src) {
  fsQ_value *q = fsQ_tensor_new(c->doc, FS_F32, like->rank, like->shape, NULL);
  if (!q || !count) return q;
  ck_slice *v = (src = ck_host(c, dev, src, (size_t)count * sizeof *src)) ? fsE_ck_room(c->sl, c->ns, &c->caps, sizeof *v)
                                                                        : NULL;
  if (!v) return NULL;
  c->sl = v;
  c->sl[c->ns++] = (ck_slice){q, (uint64_t)first, (uint64_t)count, src};
  return q;
}

/* A plain state entry (numbers, strings, containers, tensors) as a value of
 * the checkpoint. */
static fsQ_value *ck_plain(ckpt *c, const char *key, const fs_value *v, int depth) {
  fs_tensor *t = fsE_as_tensor(v);
  fsQ_value *q = NULL;
  if (depth >= FSV_MAX_DEPTH) { /* what a literal reads back, as the run's values go */
    fsV_seterr("RecursionError: maximum recursion depth exceeded while pickling an object");
    return NULL;
  }
  switch (v->type) {
  case FSV_NONE: return fsQ_none(c->doc);
  case FSV_BOOL: return fsQ_bool(c->doc, v->u.b);
  case FSV_INT: return fsQ_int(c->doc, v->u.i);
  case FSV_FLOAT: return fsQ_float(c->doc, v->u.f);
  case FSV_STR: return fsQ_str(c->doc, v->u.str.s);
  case FSV_LIST:
  case FSV_TUPLE:
    q = fsQ_container(c->doc, v->type == FSV_LIST ? FSQ_LIST : FSQ_TUPLE);
    for (size_t i = 0; q && i < v->u.seq.n; i++) {
      fsQ_value *x = ck_plain(c, key, v->u.seq.items[i], depth + 1);
      if (!x || fsQ_push(q, x) < 0) q = NULL;
    }
    return q;
  case FSV_DICT:
    q = fsQ_container(c->doc, FSQ_DICT);
    for (size_t i = 0; q && i < v->u.dict.n; i++) {
      fsQ_value *k = ck_plain(c, key, v->u.dict.keys[i], depth + 1), *x = k ? ck_plain(c, key, v->u.dict.vals[i], depth + 1) : NULL;
      if (!x || fsQ_set(q, k, x) < 0) q = NULL;
    }
    return q;
  default:
    if (t) return ck_tensor(c, key, t);
    fsV_seterr("cannot save state entry '%s': a %s is not serializable", key, fsV_type_name(v));
    return NULL;
  }
}

/* filter[key](name, value) decides whether a module parameter is saved */
static int keep(fsE_ctx *E, fs_value *filter, fs_value *key, const char *name, fs_tensor *t, bool *yes) {
  fs_value *fn = filter->type == FSV_DICT ? fsV_dict_get(filter, key) : NULL;
  *yes = true;
  if (!fn) return 0;
  fs_value *args[2] = {fsV_cstr(name), fsE_tensor_value(fsT_retain(t))};
  fsV_args fa = {args, 2, NULL, NULL, 0, {0, 0}};
  fs_value *r = args[0] && args[1] ? fsE_call(E, fn, &fa) : NULL;
  fsV_release(args[0]);
  fsV_release(args[1]);
  if (!r) return -1;
  *yes = fsV_truthy(r);
  fsV_release(r);
  return 0;
}

/* The index of parameter t among an FSDP model's, or -1 (a buffer). */
static int64_t sharded_index(const fsSH_model *sh, const fs_tensor *t) {
  for (int64_t i = 0; i < sh->nall; i++)
    if (sh->all[i].t == t) return i;
  return -1;
}

/* module.state_dict(): an OrderedDict of the parameters and buffers the
 * filter keeps; under FSDP each parameter under its full name(s), this rank
 * holding a slice, and the buffers (whole on every rank) as they are. */
static fsQ_value *ck_module(fsE_ctx *E, ckpt *c, fs_value *key, modv *mv, fs_value *filter) {
  fsQ_value *od = fsQ_ordered_dict(c->doc);
  fsSH_model *sh = mv->sh;
  fsM_param *ps = NULL;
  int64_t n = fsM_state(mv->m, &ps); /* parameters and buffers */
  if (n < 0) return fsE_rt_fail(), NULL;
  for (int64_t i = 0; od && i < n; i++) {
    const char *name = ps[i].name;
    fs_tensor *t = ps[i].t;
    int64_t j = sh ? sharded_index(sh, t) : -1;
    bool yes;
    fsQ_value *q = NULL;
    if (keep(E, filter, key, name, t, &yes) < 0) od = NULL;
    else if (!yes) continue;
    else if (j >= 0) {
      int64_t first, count, at;
      int u = fsSH_param_slice(sh, j, &first, &count, &at);
      q = ck_sliced(c, t, first, count, sh->units[u].flat->device, fsT_f32(sh->units[u].flat) + at);
    } else {
      q = ck_tensor(c, name, t);
    }
    if (od && (!q || fsQ_set(od, fsQ_str(c->doc, name), q) < 0)) od = NULL;
  }
  fsM_params_free(ps, n);
  return od;
}

/* optimizer.state_dict() as torch 1.13 makes it: {"state": {i: what
 * lib_optim.c gives parameter i (its step, its buffers)} for each parameter
 * stepped, "param_groups": the live group dicts with "params" as indices}.
 * Under FSDP (one group) the states of the one-device layout, one per
 * original parameter, this rank holding a slice of each buffer. */
static fsQ_value *ck_optim(fabv *fv, ckpt *c, const char *key, optv *ov) {
  fs_optim *o = ov->o;
  fsQ_doc *d = c->doc;
  if (fsE_optim_sync(ov) < 0) return NULL;
  fsSH_model *sh = fsE_sharded_of(fv, o);
  int64_t n = sh ? sh->nall : o->nparams;
  fsQ_value *sd = fsQ_container(d, FSQ_DICT), *state = fsQ_container(d, FSQ_DICT);
  fsQ_value *groups = fsQ_container(d, FSQ_LIST);
  bool ok = sd && state && groups;
  for (int64_t i = 0; ok && i < n; i++) {
    int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
    fs_value *ps = NULL;
    int has = fsE_optim_param_state(o, j, &ps);
    if (has > 0 && !ck_hold(c, ps)) has = -1;
    fsQ_value *st = has > 0 ? fsQ_container(d, FSQ_DICT) : NULL;
    ok = has == 0 || (st && fsQ_set(state, fsQ_int(d, i), st) == 0);
    for (size_t e = 0; ok && has > 0 && e < ps->u.dict.n; e++) {
      const char *name = ps->u.dict.keys[e]->u.str.s;
      fs_tensor *b = fsE_as_tensor(ps->u.dict.vals[e]);
      fsQ_value *q = sh && b && strcmp(name, "step") ? ck_sliced(c, sh->all[i].t, first, count, b->device, fsT_f32(b) + at)
                                                    : ck_plain(c, key, ps->u.dict.vals[e], 1);
      ok = q && fsQ_set(st, fsQ_str(d, name), q) == 0;
    }
  }
  for (int64_t g = 0; ok && g < o->ngroups; g++) {
    const fs_value *live = ov->groups->u.seq.items[g];
    fsQ_value *gq = fsQ_container(d, FSQ_DICT), *params = fsQ_container(d, FSQ_LIST);
    ok = gq && params && fsQ_push(groups, gq) == 0;
    for (size_t e = 0; ok && e < live->u.dict.n; e++) {
      const fs_value *k = live->u.dict.keys[e];
      if (k->type != FSV_STR || !strcmp(k->u.str.s, "params")) continue;
      fsQ_value *q = ck_plain(c, key, live->u.dict.vals[e], 1);
      ok = q && fsQ_set(gq, fsQ_str(d, k->u.str.s), q) == 0;
    }
    int64_t size = sh ? sh->nall : o->groups[g].n, from = sh ? 0 : o->groups[g].first;
    for (int64_t i = 0; ok && i < size; i++) ok = fsQ_push(params, fsQ_int(d, from + i)) == 0;
    ok = ok && fsQ_set(gq, fsQ_str(d, "params"), params) == 0;
  }
  ok = ok && fsQ_set(sd, fsQ_str(d, "state"), state) == 0 && fsQ_set(sd, fsQ_str(d, "param_groups"), groups) == 0;
  return ok ? sd : NULL;
}

/* An LR scheduler: its state_dict() as it is. */
static fsQ_value *ck_sched(ckpt *c, const char *key, const fs_value *v) {
  fs_value *sd = ck_hold(c, fsE_sched_state(v));
  return sd ? ck_plain(c, key, sd, 0) : NULL;
}

/* Lightning's checkpoint of state: each module and optimizer replaced by its
 * state dict, every other entry as it is. -1 + fsV_error. */
static int ck_describe(fsE_ctx *E, fabv *fv, ckpt *c, fs_value *state, fs_value *filter) {
  fsQ_value *root = (c->doc = fsQ_new()) ? fsQ_container(c->doc, FSQ_DICT) : NULL;
  if (!root) return -1;
  c->doc->root = root;
  for (size_t i = 0; i < state->u.dict.n; i++) {
    fs_value *key = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    modv *mv = fsV_objdata(v, &fsE_module_class);
    optv *ov = fsV_objdata(v, &fsE_optim_class);
    const fs_value **p = fsE_ck_room(c->plain, c->np, &c->capp, sizeof *p);
    if (!p) return -1;
    c->plain = p;
    bool sched = fsE_is_sched(v);
    c->plain[c->np++] = mv || ov || sched ? NULL : v;
    fsQ_value *q = mv ? ck_module(E, c, key, mv, filter) : ov ? ck_optim(fv, c, key->u.str.s, ov)
                 : sched ? ck_sched(c, key->u.str.s, v) : ck_plain(c, key->u.str.s, v, 0);
    if (!q || fsQ_set(root, fsQ_str(c->doc, key->u.str.s), q) < 0) return -1;
  }
  return 0;
}

/* ---- fabric.save --------------------------------------------------------------------- */

/* The fabric.h view of a checkpoint state; *n entries, or NULL + error. */
static fsF_entry *state_entries(const fs_value *state, size_t *n) {
  *n = state->u.dict.n;
  fsF_entry *es = calloc(*n + 1, sizeof *es);
  if (!es) {
    fsV_seterr("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < *n; i++) {
    const fs_value *k = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    if (k->type != FSV_STR) {
      fsV_seterr("state keys must be strings, not %s", fsV_type_name(k));
      free(es);
      return NULL;
    }
    modv *mv = fsV_objdata(v, &fsE_module_class);
    optv *ov = fsV_objdata(v, &fsE_optim_class);
    es[i] = (fsF_entry){k->u.str.s, mv ? FSF_S_MODEL : ov ? FSF_S_OPTIM : FSF_S_OTHER,
                        mv ? &mv->st : NULL, ov ? &ov->st : NULL};
  }
  return es;
}

/* One file from all ranks (FSDP): rank 0 creates it with every value and
 * the replicated tensors, each rank writes its slices, rank 0 commits once
 * every rank has. Without FSDP, rank 0 writes it alone and the others wait. */
static int ck_write_file(fabv *fv, const char *path, ckpt *c) {
  const ck_format *fmt = fsE_ck_format_of(path);
  fsCC_comm *cc = fv->comm;
  int rank = cc ? cc->rank : 0;
  bool sharded = fv->cfg.cls == FSF_FSDP;
  ck_writer w;
  char *err = NULL;
  int64_t msg[1 + 512] = {0}; /* rank 0 created it; the temporary file's name */
  bool open = false;
  int64_t ok = 1;
  if (rank == 0) { /* the parent directory made first, as Fabric's TorchCheckpointIO does */
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash && slash != dir) *slash = '\0';
    open = dir && (!slash || slash == dir || fsK_make_dirs(dir, "checkpoint", &err) == 0) &&
           fmt->create(&w, path, c, &err) == 0;
    free(dir);
    if (open && strlen(fmt->tmp_path(&w)) < sizeof msg - sizeof msg[0]) {
      msg[0] = 1;
      strcpy((char *)(msg + 1), fmt->tmp_path(&w));
    }
    ok = open;
  }
  if (sharded) {
    if (cc && fsCC_broadcast_host(cc, msg, sizeof msg / sizeof msg[0], FS_I64, 0) < 0) ok = 0;
    else if (!msg[0]) ok = 0;
    else if (rank != 0) open = fmt->attach(&w, (const char *)(msg + 1), c, &err) == 0;
    ok &= open;
    for (size_t i = 0; ok && i < c->ns; i++)
      if (fmt->write(&w, c, c->sl[i].t, c->sl[i].first, c->sl[i].count, c->sl[i].src, &err) < 0) ok = 0;
    if (rank != 0 && open && fmt->commit(&w, ok ? &err : NULL) < 0) ok = 0; /* fsync */
    if (cc && fsCC_all_reduce_host(cc, &ok, 1, FS_I64, FSCC_MIN) < 0) ok = 0;
  }
  if (rank == 0 && open && (ok ? fmt->commit(&w, &err) < 0 : (fmt->abort(&w), 0))) ok = 0;
  if (cc && fsCC_broadcast_host(cc, &ok, 1, FS_I64, 0) < 0) ok = 0; /* the file is in place for every rank */
  if (ok) return 0;
  if (err) fsE_err_own(err);
  else if (!fsV_error()[0])
    fsV_seterr("fabric.save: %s could not be written (%s)", path,
               cc && fsT_error()[0] ? fsT_error() : rank == 0 ? "out of memory" : "another rank failed");
  return -1;
}

NATIVE(ckpt_save) {
  if (E->opt->plan) return fsE_plan_done(E, NULL); /* the model is used before an optimizer was set up */
  fabv *fv = self->u.obj.data;
  fsF_fabric *f = &fv->f;
  size_t n;
  fsF_entry *es = state_entries(s[1], &n);
  if (!es) return NULL;
  fs_value *filter = s[2];
  fsF_filter fl = {.kind = filter->type == FSV_NONE ? FSF_UNSET : filter->type == FSV_DICT ? FSF_LIST : FSF_OTHER};
  char *frepr = fl.kind == FSF_OTHER ? fsV_repr(filter) : NULL;
  size_t nf = filter->type == FSV_DICT ? filter->u.dict.n : 0;
  const char **keys = calloc(nf + 1, sizeof *keys), **vrepr = calloc(nf + 1, sizeof *vrepr);
  int *callable = calloc(nf + 1, sizeof *callable);
  fs_value *r = NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (!keys || !vrepr || !callable) {
    fsV_seterr("out of memory");
    goto done;
  }
  for (size_t i = 0; i < nf; i++) {
    const fs_value *k = filter->u.dict.keys[i], *v = filter->u.dict.vals[i];
    keys[i] = k->type == FSV_STR ? k->u.str.s : "?";
    callable[i] = v->type == FSV_OBJ && v->u.obj.cls->call != NULL;
    if (!callable[i]) vrepr[i] = fsV_repr(v);
  }
  fl.repr = frepr;
  fl.keys = keys;
  fl.callable = callable;
  fl.vrepr = vrepr;
  fl.n = nf;
  if (fsE_fabric_issues(E, a, &iss, fsF_check_save(f, es, n, &fl, &iss)) < 0) goto done;
  ckpt c = {0};
  if (ck_describe(E, fv, &c, s[1], filter) < 0) {
    if (!fsV_error()[0]) fsV_seterr("out of memory");
  } else if (ck_write_file(fv, s[0]->u.str.s, &c) == 0) {
    r = fsE_checkpoint_saved(fv, s[0]->u.str.s) < 0 ? NULL : fsV_none(); /* the run's end names it */
  }
  ck_free(&c);
done:
  for (size_t i = 0; vrepr && i < nf; i++) free((char *)vrepr[i]);
  free(keys);
  free(vrepr);
  free(callable);
  free(frepr);
  free(es);
  return r;
}

/* ---- fabric.load --------------------------------------------------------------------- */

/* A load is all-or-nothing: every entry is first staged -- read, converted
 * and validated without touching the live objects -- and only when all of
 * them are staged is anything installed (ck_apply). A module's tensors are
 * staged as host copies (ck_copy), an optimizer's state as an
 * fsE_optim_load, a plain entry as its new value. A scheduler's load is
 * itself all-or-nothing (lib_sched.c), so it is applied while staging and
 * its state before is kept to put back if a later entry fails. */

/* nbytes of host memory that apply copies into dst's storage at byte off. */
typedef struct ck_copy { fs_tensor *dst; size_t off, nbytes; void *host; } ck_copy;

typedef struct ck_load {
  ck_copy *copies;
  size_t ncopies, capcopies;
  modv **mods; /* modules loaded: their meta state is read again after apply */
  fsE_optim_load *optims;
  fs_value **plain;  /* per state entry: its new value, or NULL */
  fs_value **scheds; /* per state entry: a loaded scheduler's state before, or NULL */
  size_t n, nmods, noptims;
} ck_load;

static int ck_load_init(ck_load *L, size_t n) {
  memset(L, 0, sizeof *L);
  L->n = n;
  L->mods = calloc(n + 1, sizeof *L->mods);
  L->optims = calloc(n + 1, sizeof *L->optims);
  L->plain = calloc(n + 1, sizeof *L->plain);
  L->scheds = calloc(n + 1, sizeof *L->scheds);
  if (L->mods && L->optims && L->plain && L->scheds) return 0;
  fsV_seterr("out of memory");
  return -1;
}

/* Drops what was staged; undo: put the schedulers loaded back as they were. */
static void ck_load_free(ck_load *L, const fs_value *state, bool undo) {
  for (size_t i = 0; i < L->ncopies; i++) free(L->copies[i].host);
  for (size_t i = 0; L->optims && i < L->noptims; i++) fsE_optim_load_abort(&L->optims[i]);
  for (size_t i = 0; L->plain && i < L->n; i++) fsV_release(L->plain[i]);
  for (size_t i = 0; L->scheds && i < L->n; i++) {
    if (undo && L->scheds[i]) (void)fsE_sched_load(state->u.dict.vals[i], L->scheds[i]); /* its own state */
    fsV_release(L->scheds[i]);
  }
  free(L->copies);
  free(L->mods);
  free(L->optims);
  free(L->plain);
  free(L->scheds);
}

/* Stages host (taken; nbytes for dst at byte off). -1 + fsV_error. */
static int ck_stage_copy(ck_load *L, fs_tensor *dst, size_t off, void *host, size_t nbytes) {
  ck_copy *c = fsE_ck_room(L->copies, L->ncopies, &L->capcopies, sizeof *c);
  if (!c) {
    free(host);
    fsV_seterr("out of memory");
    return -1;
  }
  L->copies = c;
  L->copies[L->ncopies++] = (ck_copy){dst, off, nbytes, host};
  return 0;
}

/* Installs everything staged. Only a device failing to take a copy can
 * fail here (fsE_rt_fail). */
static int ck_apply(ck_load *L, fs_value *state) {
  int rc = 0;
  for (size_t i = 0; i < L->ncopies; i++) {
    ck_copy *c = &L->copies[i];
    if ((!c->dst->data && fsT_alloc_storage(c->dst, FS_DEV_CPU) < 0) ||
        fsB_transfer(c->dst->device, (char *)c->dst->data + c->off, FS_DEV_CPU, c->host, c->nbytes) < 0)
      rc = -1;
  }
  for (size_t i = 0; i < L->nmods; i++) L->mods[i]->st.meta = fsE_has_meta(L->mods[i]->m);
  for (size_t i = 0; i < L->noptims; i++) fsE_optim_load_apply(&L->optims[i]);
  L->noptims = 0;
  for (size_t i = 0; i < L->n; i++)
    if (L->plain[i] && fsV_dict_set(state, state->u.dict.keys[i], L->plain[i]) == 0) L->plain[i] = NULL;
  return rc < 0 ? (fsE_rt_fail(), -1) : 0;
}

/* Stages the whole entry in as a host copy for t. */
static int ck_read_whole(ck_load *L, const ck_file *f, const fsK_info *in, fs_tensor *t) {
  void *buf = malloc(fsT_nbytes(t) + 1);
  char *err = NULL;
  if (!buf) return fsV_seterr("out of memory"), -1;
  if (f->fmt->read(f, in, 0, in->numel, t->dtype, buf, &err) < 0) {
    free(buf);
    fsE_err_own(err);
    return -1;
  }
  return ck_stage_copy(L, t, 0, buf, fsT_nbytes(t));
}

/* Stages names[0..n) (with shapes of ts) as host copies for ts.
 * strict: the tensors under prefix must be exactly these; else missing and
 * mismatched ones are skipped. */
static int ck_read(ck_load *L, const ck_file *f, fs_tensor *const *ts, const char *const *names, size_t n,
                   const char *prefix, bool strict) {
  fsK_entry *want = calloc(n + 1, sizeof *want);
  const fsK_info **found = calloc(n + 1, sizeof *found);
  char *report = NULL;
  int rc = -1;
  if (!want || !found) fsV_seterr("out of memory");
  else {
    for (size_t i = 0; i < n; i++) want[i] = (fsK_entry){names[i], ts[i]->dtype, ts[i]->rank, ts[i]->shape, NULL};
    report = fsK_match(&f->k, want, n, prefix, found);
    rc = report && strict ? -1 : 0;
    if (rc < 0) fsV_seterr("%s", report);
    for (size_t i = 0; rc == 0 && i < n; i++)
      if (found[i]) rc = ck_read_whole(L, f, found[i], ts[i]);
  }
  free(want);
  free(found);
  free(report);
  return rc;
}

/* count floats of a checkpoint entry from first into host memory: *out. -1 + fsV_error. */
static int ck_read_slice(const ck_file *f, const fsK_info *in, int64_t first, int64_t count, float **out) {
  float *h = malloc((size_t)count * sizeof *h + 1);
  char *err = NULL;
  *out = NULL;
  if (!h) return fsV_seterr("out of memory"), -1;
  if (f->fmt->read(f, in, (uint64_t)first, (uint64_t)count, FS_F32, h, &err) < 0) {
    free(h);
    fsE_err_own(err);
    return -1;
  }
  *out = h;
  return 0;
}

/* FSDP: each rank reads only its slices of the one-device layout for the
 * parameters, and the buffers (whole on every rank) as they are; ts and
 * names as load_module gives them. */
static int load_sharded(ck_load *L, const ck_file *f, fsSH_model *sh, fs_tensor *const *ts, const char *const *names,
                        size_t n, const char *prefix, bool strict) {
  fsK_entry *want = calloc(n + 1, sizeof *want);
  const fsK_info **found = calloc(n + 1, sizeof *found);
  char *report = NULL;
  int rc = want && found ? 0 : -1;
  if (rc < 0) fsV_seterr("out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++) want[i] = (fsK_entry){names[i], ts[i]->dtype, ts[i]->rank, ts[i]->shape, NULL};
  if (rc == 0 && (report = fsK_match(&f->k, want, n, prefix, found)) && strict) {
    fsV_seterr("%s", report);
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < n; i++) {
    int64_t j = sharded_index(sh, ts[i]), first, count, at;
    float *h;
    if (!found[i]) continue;
    if (j < 0) {
      rc = ck_read_whole(L, f, found[i], ts[i]);
      continue;
    }
    int u = fsSH_param_slice(sh, j, &first, &count, &at);
    if (count)
      rc = ck_read_slice(f, found[i], first, count, &h) < 0 ? -1
         : ck_stage_copy(L, sh->units[u].flat, (size_t)at * sizeof *h, h, (size_t)count * sizeof *h);
  }
  free(want);
  free(found);
  free(report);
  return rc;
}

static int load_module(ck_load *L, const ck_file *f, const char *key, modv *mv, bool strict) {
  L->mods[L->nmods++] = mv;
  fsM_param *ps;
  int64_t n = fsM_state(mv->m, &ps); /* parameters and buffers */
  if (n < 0) return fsE_rt_fail(), -1;
  fs_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
  char **names = calloc((size_t)n + 1, sizeof *names);
  int rc = ts && names ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    ts[i] = ps[i].t;
    size_t len = strlen(key) + strlen(ps[i].name) + 2;
    if (!(names[i] = malloc(len))) rc = -1;
    else snprintf(names[i], len, "%s%s%s", key, *key ? "." : "", ps[i].name);
  }
  if (rc < 0) fsV_seterr("out of memory");
  else {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s%s", key, *key ? "." : "");
    rc = mv->sh ? load_sharded(L, f, mv->sh, ts, (const char *const *)names, (size_t)n, prefix, strict)
                : ck_read(L, f, ts, (const char *const *)names, (size_t)n, prefix, strict);
  }
  for (int64_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(ts);
  fsM_params_free(ps, n);
  return rc;
}

/* The value at key.a.b.c (key "" for load_raw: none): as get. */
static int ck_get(const ck_file *f, const char *key, const char *a, const char *b, const char *c, fs_value **out) {
  const char *path[4] = {key, a, b, c};
  int skip = *key ? 0 : 1;
  return f->fmt->get(f, path + skip, (c ? 4 : b ? 3 : a ? 2 : 1) - skip, out);
}

/* The saved param_groups into the staged group dicts, after torch's checks.
 * A checkpoint of the layout before torch's has only "K.lr", which every
 * group takes. 0 when the file has neither (the optimizer is not in it). */
static int stage_groups(const ck_file *f, const char *key, fsE_optim_load *O, const fsSH_model *sh) {
  fs_value *groups = NULL, *lr = NULL, *name = NULL;
  int found = ck_get(f, key, "param_groups", NULL, NULL, &groups);
  if (found > 0) {
    int rc = fsE_optim_load_groups(O, groups, sh ? sh->nall : -1); /* FSDP: the one-device layout */
    fsV_release(groups);
    return rc < 0 ? -1 : 1;
  }
  if (found < 0 || (found = ck_get(f, key, "lr", NULL, NULL, &lr)) <= 0) return found; /* the old layout */
  if (!(name = fsV_cstr("lr"))) found = -1;
  for (int64_t g = 0; found > 0 && g < O->ov->o->ngroups; g++)
    if (fsV_dict_set(O->groups[g], name, fsV_retain(lr)) < 0) found = -1;
  fsV_release(name);
  fsV_release(lr);
  return found;
}

/* Stages an optimizer's saved state: its groups, then each parameter's
 * step and buffers (FSDP: this rank's slices of each buffer), validated.
 * 0 without staging anything when the file has no such optimizer. */
static int load_optim(ck_load *L, const ck_file *f, const char *key, fabv *fv, optv *ov) {
  fsSH_model *sh = fv ? fsE_sharded_of(fv, ov->o) : NULL;
  fsE_optim_load *O = &L->optims[L->noptims];
  if (fsE_optim_load_begin(O, ov) < 0) return -1;
  L->noptims++;
  int rc = stage_groups(f, key, O, sh);
  if (rc <= 0) {
    fsE_optim_load_abort(O);
    L->noptims--;
    return rc;
  }
  rc = 0;
  for (int64_t i = 0; rc == 0 && i < (sh ? sh->nall : ov->o->nparams); i++) {
    int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
    char index[24];
    snprintf(index, sizeof index, "%lld", (long long)i);
    for (int w = -1; rc == 0 && w < 3; w++) {
      const char *bn = w < 0 ? "step" : fsO_state_name(ov->o->kind, w);
      char name[768];
      const fsK_info *in = NULL;
      fs_value *v = NULL;
      if (!bn) continue;
      snprintf(name, sizeof name, "%s%sstate.%s.%s", key, *key ? "." : "", index, bn);
      if (sh && w >= 0 && (in = fsK_find(&f->k, name))) { /* a slice straight into the staged buffer */
        fs_tensor *t = sh->all[i].t, *slot = fsE_optim_load_slot(O, j, bn);
        float *h = NULL;
        if (in->ndim != t->rank || memcmp(in->shape, t->shape, (size_t)t->rank * sizeof *t->shape)) {
          char b[64];
          fsV_seterr("optimizer state %s: '%s' must be a tensor of shape %s", index, bn, fsT_shape_str(t, b, sizeof b));
          rc = -1;
        } else if (!slot || (count && ck_read_slice(f, in, first, count, &h) < 0)) {
          rc = -1;
        } else if (count && fsB_transfer(slot->device, fsT_f32(slot) + at, FS_DEV_CPU, h, (size_t)count * sizeof *h) < 0) {
          rc = (fsE_rt_fail(), -1);
        }
        free(h);
        continue;
      }
      int found = ck_get(f, key, "state", index, bn, &v);
      rc = found < 0 ? -1 : found == 0 ? 0 : w < 0 ? fsE_optim_load_step(O, j, v) : fsE_optim_load_entry(O, j, bn, v);
      fsV_release(v);
    }
  }
  return rc < 0 ? -1 : fsE_optim_load_check(O);
}

/* The saved value at path[0..n) shaped like `like` (a live state dict):
 * dicts and lists of dicts are walked as the safetensors layout flattens
 * them, each leaf read on its own; a leaf the file lacks (or cannot spell,
 * as safetensors' repr of inf) keeps like's value. */
static fs_value *ck_get_like(const ck_file *f, const char **path, int n, const fs_value *like) {
  bool dict = like->type == FSV_DICT, seq = like->type == FSV_LIST || like->type == FSV_TUPLE;
  bool dicts = false;
  for (size_t i = 0; seq && i < like->u.seq.n; i++) dicts |= like->u.seq.items[i]->type == FSV_DICT;
  if (n == 16 || (!dict && !dicts)) {
    fs_value *v = NULL;
    int found = f->fmt->get(f, path, n, &v);
    if (found < 0) fsV_clearerr();
    return found > 0 ? v : fsV_retain((fs_value *)like);
  }
  size_t m = dict ? like->u.dict.n : like->u.seq.n;
  fs_value *r = dict ? fsV_dict() : fsV_list(m);
  for (size_t i = 0; r && i < m; i++) {
    const fs_value *k = dict ? like->u.dict.keys[i] : NULL;
    char part[32];
    if (k && k->type == FSV_STR) path[n] = k->u.str.s;
    else {
      snprintf(part, sizeof part, "%lld", (long long)(k ? fsV_to_double(k) : (double)i));
      path[n] = part;
    }
    fs_value *x = ck_get_like(f, path, n + 1, dict ? like->u.dict.vals[i] : like->u.seq.items[i]);
    int rc = !x ? -1 : dict ? fsV_dict_set(r, (fs_value *)k, x) : fsV_list_append(r, x);
    if (rc < 0) {
      fsV_release(r);
      r = NULL;
    }
  }
  return r;
}

/* A scheduler's saved state, loaded (all or nothing); its state before in
 * *before, for ck_load_free to put back. */
static int load_sched(const ck_file *f, const char *key, fs_value *v, fs_value **before) {
  const char *path[16] = {key};
  fs_value *like = fsE_sched_state(v), *sd = like ? ck_get_like(f, path, 1, like) : NULL;
  int rc = sd ? fsE_sched_load(v, sd) : -1;
  if (rc == 0) *before = like, like = NULL;
  fsV_release(like);
  fsV_release(sd);
  return rc;
}

/* Whether the checkpoint has the top-level entry `want`: a plain entry, or
 * a module's or optimizer's, flattened to tensors and metadata "want.NAME". */
static bool ck_has_entry(const ck_file *f, const char *want) {
  size_t n = strlen(want);
  for (size_t i = 0; i < f->fmt->nkeys(f); i++)
    if (f->fmt->key(f, i) && !strcmp(f->fmt->key(f, i), want)) return true;
  for (size_t i = 0; i < f->k.n + f->k.nmeta; i++) {
    const char *name = i < f->k.n ? f->k.t[i].name : f->k.meta[i - f->k.n].key;
    if (!strncmp(name, want, n) && name[n] == '.') return true;
  }
  return false;
}

NATIVE(ckpt_load) {
  if (E->opt->plan) return fsE_plan_done(E, NULL); /* the model is used before an optimizer was set up */
  fabv *fv = self->u.obj.data;
  fsF_fabric *f = &fv->f;
  fs_value *state = s[1];
  size_t n = 0;
  fsF_entry *es = state->type == FSV_DICT ? state_entries(state, &n) : calloc(1, sizeof *es);
  if (!es) return NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  ck_file cf;
  ck_load L;
  if (fsE_fabric_issues(E, a, &iss, fsF_check_load(f, es, n, state->type == FSV_NONE, &iss)) < 0) {
    free(es);
    return NULL;
  }
  free(es);
  if (fsE_ck_open(&cf, s[0]->u.str.s) < 0) return NULL;
  /* strict: every key the state asks for is in the checkpoint (Fabric's
   * _validate_keys_for_strict_loading names the first one missing) */
  for (size_t i = 0; fsV_truthy(s[2]) && i < n; i++) {
    const char *want = state->u.dict.keys[i]->u.str.s;
    bool found = ck_has_entry(&cf, want);
    if (!found) {
      cf.fmt->close(&cf);
      fsV_seterr("KeyError: \"The requested state contains a key '%s' that does not exist in the loaded checkpoint. "
                 "To disable strict loading, set `strict=False`.\"", want);
      return NULL;
    }
  }
  int rc = ck_load_init(&L, n);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    fs_value *k = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    const char *path[1] = {k->u.str.s};
    modv *mv = fsV_objdata(v, &fsE_module_class);
    optv *ov = fsV_objdata(v, &fsE_optim_class);
    if (mv) rc = load_module(&L, &cf, k->u.str.s, mv, fsV_truthy(s[2]));
    else if (ov) rc = load_optim(&L, &cf, k->u.str.s, fv, ov);
    else if (fsE_is_sched(v)) rc = load_sched(&cf, k->u.str.s, v, &L.scheds[i]);
    else rc = cf.fmt->get(&cf, path, 1, &L.plain[i]) < 0 ? -1 : 0;
  }
  /* what the state did not consume: the checkpoint's other entries */
  fs_value *rest = rc == 0 ? fsV_dict() : NULL;
  for (size_t i = 0; rest && i < cf.fmt->nkeys(&cf); i++) {
    const char *key = cf.fmt->key(&cf, i);
    if (!key || (state->type == FSV_DICT && fsV_dict_getstr(state, key))) continue;
    fs_value *kv = fsV_cstr(key), *x = NULL;
    int got = kv ? cf.fmt->get(&cf, &key, 1, &x) : -1;
    if (got < 0 || (got > 0 && fsV_dict_set(rest, kv, x) < 0)) {
      fsV_release(rest);
      rest = NULL;
    }
    fsV_release(kv);
  }
  cf.fmt->close(&cf);
  if (rest && ck_apply(&L, state) < 0) {
    fsV_release(rest);
    rest = NULL;
  }
  ck_load_free(&L, state, !rest);
  if (!rest && !fsV_error()[0]) fsV_seterr("out of memory");
  return rest;
}

/* fabric.load_raw(path, obj, strict): a module's or an optimizer's state
 * from a checkpoint written without keys (as torch.save(obj.state_dict())). */
NATIVE(ckpt_load_raw) {
  if (E->opt->plan) return fsE_plan_done(E, NULL); /* the model is used before an optimizer was set up */
  fabv *fv = self->u.obj.data;
  fs_value *r = NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  modv *mv = fsV_objdata(s[1], &fsE_module_class);
  optv *ov = fsV_objdata(s[1], &fsE_optim_class);
  ck_file cf;
  ck_load L;
  if (!mv && !ov) fsV_seterr("load_raw(): expected a module or an optimizer, got %s", fsV_type_name(s[1]));
  else if (fsE_fabric_issues(E, a, &iss, fsF_check_load_raw(&fv->f, ov != NULL, &iss)) < 0) {
  } else if (ck_load_init(&L, 1) == 0) {
    if (fsE_ck_open(&cf, s[0]->u.str.s) == 0) {
      if ((mv ? load_module(&L, &cf, "", mv, fsV_truthy(s[2])) : load_optim(&L, &cf, "", fv, ov)) == 0 &&
          ck_apply(&L, NULL) == 0)
        r = fsV_none();
      cf.fmt->close(&cf);
    }
    ck_load_free(&L, NULL, false);
  } else {
    ck_load_free(&L, NULL, false);
  }
  fsF_issues_free(&iss);
  return r;
}

static const fsE_reg ckpt_funcs[] = {
  {"Fabric.save", ckpt_save}, {"Fabric.load", ckpt_load}, {"Fabric.load_raw", ckpt_load_raw},
  {NULL, NULL},
};
const fsE_lib fsE_lib_ckpt = {"ckpt", ckpt_funcs};
