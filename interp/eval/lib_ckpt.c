/* lib_ckpt.c -- fabric.save / fabric.load / fabric.load_raw over
 * runtime/io/safetensors.h: all-or-nothing files, FSDP shards written by every
 * rank into one file and read back as each rank's slices. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdarg.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "safetensors.h"

/* ---- checkpoints: fabric.save / fabric.load ----------------------------------------
 * One safetensors file. A module under key K stores each parameter as
 * "K.<state-dict name>"; an optimizer under K stores metadata "K.lr" and
 * "K.state.<i>.step" and its buffers as "K.state.<i>.<torch's name>"
 * (momentum_buffer; exp_avg, exp_avg_sq); any other entry is metadata
 * "K" holding its repr, read back as a Python literal. */

/* An FSDP rank's part of a tensor: elements [first, first + count) from src. */
typedef struct ck_slice { const char *name; uint64_t first, count; const float *src; } ck_slice;

typedef struct ckpt {
  fsK_entry *t; size_t nt, capt;
  ck_slice *sl; size_t ns, caps;  /* sharded tensors (their entries in t have no data) */
  fsK_meta *m; size_t nm, capm;
  char **owned; size_t nowned, capowned; /* names and texts to free */
} ckpt;

/* v (n of *cap elements of size elem used) with room for one more: v itself,
 * or v moved to a doubled block; NULL on OOM (v still valid). */
static void *ck_room(void *v, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return v;
  size_t want = *cap ? 2 * *cap : 16;
  void *w = realloc(v, want * elem);
  if (w) *cap = want;
  return w;
}

static char *ck_own(ckpt *c, char *s) {
  char **o = s ? ck_room(c->owned, c->nowned, &c->capowned, sizeof *o) : NULL;
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
  return ck_own(c, h);
}

static char *ck_fmt(ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *ck_fmt(ckpt *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return ck_own(c, strdup(buf));
}

static int ck_tensor(ckpt *c, const char *name, const fs_tensor *t) {
  if (!name) return -1;
  if (!t->data) {
    fsV_seterr("cannot save '%s': the tensor is on the %s device", name, fsT_device_name(t->device));
    return -1;
  }
  const void *data = ck_host(c, t->device, t->data, fsT_nbytes(t));
  fsK_entry *e = data ? ck_room(c->t, c->nt, &c->capt, sizeof *e) : NULL;
  if (!e) return -1;
  c->t = e;
  c->t[c->nt++] = (fsK_entry){name, t->dtype, t->rank, t->shape, data};
  return 0;
}

/* A sharded tensor of shape like's: this rank holds count elements from
 * first, at src on dev. */
static int ck_sliced(ckpt *c, const char *name, const fs_tensor *like, int64_t first, int64_t count,
                     fs_device dev, const float *src) {
  if (!name || (count && !(src = ck_host(c, dev, src, (size_t)count * sizeof *src)))) return -1;
  fsK_entry *e = ck_room(c->t, c->nt, &c->capt, sizeof *e);
  if (!e) return -1;
  c->t = e;
  c->t[c->nt++] = (fsK_entry){name, FS_F32, like->rank, like->shape, NULL};
  if (!count) return 0;
  ck_slice *v = ck_room(c->sl, c->ns, &c->caps, sizeof *v);
  if (!v) return -1;
  c->sl = v;
  c->sl[c->ns++] = (ck_slice){name, (uint64_t)first, (uint64_t)count, src};
  return 0;
}

static int ck_meta(ckpt *c, const char *key, const char *value) {
  fsK_meta *m = key && value ? ck_room(c->m, c->nm, &c->capm, sizeof *m) : NULL;
  if (!m) return -1;
  c->m = m;
  c->m[c->nm++] = (fsK_meta){key, value};
  return 0;
}

static void ck_free(ckpt *c) {
  for (size_t i = 0; i < c->nowned; i++) free(c->owned[i]);
  free(c->owned);
  free(c->sl);
  free(c->t);
  free(c->m);
}

static const char *buf_name(const optv *ov, int which) {
  if (ov->o->kind == FSO_SGD) return which ? NULL : "momentum_buffer";
  return which ? "exp_avg_sq" : "exp_avg";
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

/* FSDP: every parameter under its full name; this rank writes its slice. */
static int ck_sharded_module(fsE_ctx *E, ckpt *c, fs_value *key, fsSH_model *sh, fs_value *filter) {
  for (int64_t i = 0; i < sh->nall; i++) {
    int64_t first, count, at;
    int u = fsSH_param_slice(sh, i, &first, &count, &at);
    bool yes;
    if (keep(E, filter, key, sh->all[i].name, sh->all[i].t, &yes) < 0) return -1;
    if (yes && ck_sliced(c, ck_fmt(c, "%s.%s", key->u.str.s, sh->all[i].name), sh->all[i].t, first, count,
                         sh->units[u].flat->device, fsT_f32(sh->units[u].flat) + at) < 0)
      return -1;
  }
  return 0;
}

static int ck_add(fsE_ctx *E, fabv *fv, ckpt *c, fs_value *key, fs_value *v, fs_value *filter) {
  const char *k = key->u.str.s;
  modv *mv = fsV_objdata(v, &fsE_module_class);
  optv *ov = fsV_objdata(v, &fsE_optim_class);
  if (mv && mv->sh) return ck_sharded_module(E, c, key, mv->sh, filter);
  if (mv) {
    fsM_param *ps;
    int64_t n = fsM_state(mv->m, &ps); /* parameters and buffers */
    int rc = n < 0 ? (fsE_rt_fail(), -1) : 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
      bool yes;
      rc = keep(E, filter, key, ps[i].name, ps[i].t, &yes);
      if (rc == 0 && yes) rc = ck_tensor(c, ck_fmt(c, "%s.%s", k, ps[i].name), ps[i].t);
    }
    if (n >= 0) fsM_params_free(ps, n);
    return rc;
  }
  if (ov) {
    char lr[40];
    fsV_float_repr(ov->o->lr, lr, sizeof lr);
    if (ck_meta(c, ck_fmt(c, "%s.lr", k), ck_own(c, strdup(lr))) < 0) return -1;
    /* under FSDP the states of the one-device layout: one per parameter, sliced */
    fsSH_model *sh = fsE_sharded_of(fv, ov->o);
    for (int64_t i = 0; i < (sh ? sh->nall : ov->o->nparams); i++) {
      int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
      if (ck_meta(c, ck_fmt(c, "%s.state.%lld.step", k, (long long)i),
                  ck_fmt(c, "%lld", (long long)ov->o->steps[j])) < 0)
        return -1;
      fs_tensor *b[2] = {ov->o->buf0[j], ov->o->buf1[j]};
      for (int w = 0; w < 2; w++) {
        char *name = b[w] ? ck_fmt(c, "%s.state.%lld.%s", k, (long long)i, buf_name(ov, w)) : NULL;
        if (b[w] && (sh ? ck_sliced(c, name, sh->all[i].t, first, count, b[w]->device, fsT_f32(b[w]) + at)
                        : ck_tensor(c, name, b[w])) < 0)
          return -1;
      }
    }
    return 0;
  }
  if (v->type == FSV_OBJ) {
    fsV_seterr("cannot save state entry '%s': a %s is not serializable", k, fsV_type_name(v));
    return -1;
  }
  return ck_meta(c, k, ck_own(c, fsV_repr(v)));
}

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

static uint64_t entry_numel(const fsK_entry *e) {
  uint64_t n = 1;
  for (int d = 0; d < e->ndim; d++) n *= (uint64_t)e->shape[d];
  return n;
}

/* FSDP: one ordinary file from all ranks (safetensors.h's sliced writer):
 * rank 0 creates it with every entry and writes the replicated ones, each
 * rank writes its slices, rank 0 commits once every rank has. */
static int save_sharded(fabv *fv, const char *path, const ckpt *c) {
  fsCC_comm *cc = fv->comm;
  int rank = cc ? cc->rank : 0;
  fsK_writer w;
  char *err = NULL;
  int64_t msg[1 + 512] = {0}; /* rank 0 created it; the temporary file's name */
  bool open = false;
  int64_t ok = 1;
  if (rank == 0) {
    open = fsK_create(&w, path, c->t, c->nt, c->m, c->nm, &err) == 0;
    if (open && strlen(fsK_tmp_path(&w)) < sizeof msg - sizeof msg[0]) {
      msg[0] = 1;
      strcpy((char *)(msg + 1), fsK_tmp_path(&w));
    }
    for (size_t i = 0; open && ok && i < c->nt; i++)
      if (c->t[i].data && fsK_write(&w, c->t[i].name, 0, entry_numel(&c->t[i]), c->t[i].data, &err) < 0) ok = 0;
  }
  if (cc && fsCC_broadcast_host(cc, msg, sizeof msg / sizeof msg[0], FS_I64, 0) < 0) ok = 0;
  else if (!msg[0]) ok = 0;
  else if (rank != 0) open = fsK_attach(&w, (const char *)(msg + 1), &err) == 0;
  ok &= open;
  for (size_t i = 0; ok && i < c->ns; i++)
    if (fsK_write(&w, c->sl[i].name, c->sl[i].first, c->sl[i].count, c->sl[i].src, &err) < 0) ok = 0;
  if (rank != 0 && open && fsK_commit(&w, ok ? &err : NULL) < 0) ok = 0; /* fsync */
  if (cc && fsCC_all_reduce_host(cc, &ok, 1, FS_I64, FSCC_MIN) < 0) ok = 0;
  if (rank == 0 && open && (ok ? fsK_commit(&w, &err) < 0 : (fsK_abort(&w), 0))) ok = 0;
  if (cc && fsCC_broadcast_host(cc, &ok, 1, FS_I64, 0) < 0) ok = 0; /* the file is in place for every rank */
  if (ok) return 0;
  if (err) fsE_err_own(err);
  else fsV_seterr("fabric.save: %s could not be written (%s)", path,
                  cc && fsT_error()[0] ? fsT_error() : "another rank failed");
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
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = ck_add(E, fv, &c, s[1]->u.dict.keys[i], s[1]->u.dict.vals[i], filter);
    if (rc < 0 && !fsV_error()[0]) fsV_seterr("out of memory");
  }
  char *err = NULL;
  if (rc == 0 && fv->cfg.cls == FSF_FSDP)
    r = save_sharded(fv, s[0]->u.str.s, &c) == 0 ? fsV_none() : NULL;
  else if (rc == 0 && (!fv->comm || fv->comm->rank == 0) && fsK_save(s[0]->u.str.s, c.t, c.nt, c.m, c.nm, &err) < 0)
    fsE_err_own(err);
  else if (rc == 0 && fv->comm && fsCC_barrier(fv->comm) < 0) /* the file is complete for every rank */
    fsE_comm_fail();
  else if (rc == 0)
    r = fsV_none();
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

/* Reads names[0..n) (with shapes of ts) into ts' storage. strict: the
 * tensors under prefix must be exactly these; else missing ones are skipped. */
static int ck_read(const fsK_file *kf, fs_tensor *const *ts, const char *const *names, size_t n,
                   const char *prefix, bool strict) {
  fsK_entry *want = calloc(n + 1, sizeof *want);
  void **bufs = calloc(n + 1, sizeof *bufs);
  char *err = NULL;
  int rc = -1;
  if (!want || !bufs) fsV_seterr("out of memory");
  else {
    for (size_t i = 0; i < n; i++) want[i] = (fsK_entry){names[i], ts[i]->dtype, ts[i]->rank, ts[i]->shape, NULL};
    if (fsK_load(kf, want, n, prefix, strict, bufs, NULL, &err) < 0) fsE_err_own(err);
    else rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
      if (!bufs[i]) {
        continue;
      } else if ((!ts[i]->data && fsT_alloc_storage(ts[i], FS_DEV_CPU) < 0) ||
                 fsB_transfer(ts[i]->device, ts[i]->data, FS_DEV_CPU, bufs[i], fsT_nbytes(ts[i])) < 0) {
        fsE_rt_fail();
        rc = -1;
      }
    }
  }
  for (size_t i = 0; bufs && i < n; i++) free(bufs[i]);
  free(bufs);
  free(want);
  return rc;
}

/* count floats of a checkpoint entry from first into dst on dev (through the
 * host when dev is a device); -1 + fsV_error. */
static int ck_read_slice(const fsK_file *kf, const fsK_info *in, int64_t first, int64_t count,
                         fs_device dev, float *dst) {
  float *h = dev == FS_DEV_CPU ? dst : malloc((size_t)count * sizeof *h);
  char *err = NULL;
  int rc = -1;
  if (!h) fsV_seterr("out of memory");
  else if (fsK_read(kf, in, (uint64_t)first, (uint64_t)count, FS_F32, h, &err) < 0) fsE_err_own(err);
  else if (h != dst && fsB_transfer(dev, dst, FS_DEV_CPU, h, (size_t)count * sizeof *h) < 0) fsE_rt_fail();
  else rc = 0;
  if (h != dst) free(h);
  return rc;
}

/* FSDP: each rank reads only its slices of the one-device layout. */
static int load_sharded(const fsK_file *kf, const char *key, fsSH_model *sh, bool strict) {
  fsK_entry *want = calloc((size_t)sh->nall + 1, sizeof *want);
  char **names = calloc((size_t)sh->nall + 1, sizeof *names);
  const fsK_info **found = calloc((size_t)sh->nall + 1, sizeof *found);
  char prefix[512], *report = NULL;
  snprintf(prefix, sizeof prefix, "%s%s", key, *key ? "." : "");
  int rc = want && names && found ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < sh->nall; i++) {
    fs_tensor *t = sh->all[i].t;
    size_t len = strlen(prefix) + strlen(sh->all[i].name) + 1;
    if (!(names[i] = malloc(len))) rc = -1;
    else snprintf(names[i], len, "%s%s", prefix, sh->all[i].name);
    want[i] = (fsK_entry){names[i], t->dtype, t->rank, t->shape, NULL};
  }
  if (rc < 0) fsV_seterr("out of memory");
  else if ((report = fsK_match(kf, want, (size_t)sh->nall, prefix, found)) && strict) {
    fsV_seterr("%s", report);
    rc = -1;
  }
  for (int64_t i = 0; rc == 0 && i < sh->nall; i++) {
    int64_t first, count, at;
    int u = fsSH_param_slice(sh, i, &first, &count, &at);
    fs_tensor *flat = sh->units[u].flat;
    if (found[i] && count && ck_read_slice(kf, found[i], first, count, flat->device, fsT_f32(flat) + at) < 0)
      rc = -1;
  }
  for (int64_t i = 0; names && i < sh->nall; i++) free(names[i]);
  free(names);
  free(want);
  free(found);
  free(report);
  return rc;
}

static int load_module(const fsK_file *kf, const char *key, modv *mv, bool strict) {
  if (mv->sh) return load_sharded(kf, key, mv->sh, strict);
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
    rc = ck_read(kf, ts, (const char *const *)names, (size_t)n, prefix, strict);
  }
  if (rc == 0) mv->st.meta = fsE_has_meta(mv->m);
  for (int64_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(ts);
  fsM_params_free(ps, n);
  return rc;
}

static int load_optim(const fsK_file *kf, const char *key, fabv *fv, optv *ov) {
  char name[768], pre[256];
  snprintf(pre, sizeof pre, "%s%s", key, *key ? "." : ""); /* load_raw: no key */
  snprintf(name, sizeof name, "%slr", pre);
  const char *lr = fsK_meta_get(kf, name);
  if (lr) ov->o->lr = strtod(lr, NULL);
  fsSH_model *sh = fv ? fsE_sharded_of(fv, ov->o) : NULL; /* FSDP: this rank's slices of each state */
  for (int64_t i = 0; i < (sh ? sh->nall : ov->o->nparams); i++) {
    int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
    snprintf(name, sizeof name, "%sstate.%lld.step", pre, (long long)i);
    const char *st = fsK_meta_get(kf, name);
    ov->o->steps[j] = st ? strtoll(st, NULL, 10) : 0;
    fs_tensor **slot[2] = {&ov->o->buf0[j], &ov->o->buf1[j]};
    for (int w = 0; w < 2; w++) {
      const char *bn = buf_name(ov, w);
      if (!bn) continue;
      snprintf(name, sizeof name, "%sstate.%lld.%s", pre, (long long)i, bn);
      const fsK_info *in = fsK_find(kf, name);
      if (!in) continue;
      if (!*slot[w] && !(*slot[w] = fsT_zeros_like(ov->o->params[j]))) return fsE_rt_fail(), -1;
      if (sh && count && ck_read_slice(kf, in, first, count, (*slot[w])->device, fsT_f32(*slot[w]) + at) < 0)
        return -1;
      const char *nm = name;
      if (!sh && ck_read(kf, slot[w], &nm, 1, NULL, false) < 0) return -1;
    }
  }
  return 0;
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
  fsK_file kf;
  char *err = NULL;
  if (fsE_fabric_issues(E, a, &iss, fsF_check_load(f, es, n, state->type == FSV_NONE, &iss)) < 0) {
    free(es);
    return NULL;
  }
  free(es);
  if (fsK_open(&kf, s[0]->u.str.s, &err) < 0) return fsE_err_own(err);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    fs_value *k = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    modv *mv = fsV_objdata(v, &fsE_module_class);
    optv *ov = fsV_objdata(v, &fsE_optim_class);
    if (mv) rc = load_module(&kf, k->u.str.s, mv, fsV_truthy(s[2]));
    else if (ov) rc = load_optim(&kf, k->u.str.s, fv, ov);
    else if (fsK_meta_get(&kf, k->u.str.s)) {
      fs_value *x = fsV_literal(fsK_meta_get(&kf, k->u.str.s));
      rc = x ? fsV_dict_set(state, k, x) : -1;
    }
  }
  /* what the state did not consume: plain entries of the checkpoint */
  fs_value *rest = rc == 0 ? fsV_dict() : NULL;
  for (size_t i = 0; rest && i < kf.nmeta; i++) {
    const char *key = kf.meta[i].key;
    bool used = false;
    for (size_t j = 0; state->type == FSV_DICT && j < state->u.dict.n && !used; j++) {
      const char *sk = state->u.dict.keys[j]->u.str.s;
      size_t l = strlen(sk);
      used = strncmp(key, sk, l) == 0 && (key[l] == '\0' || key[l] == '.');
    }
    if (used || strchr(key, '.') || strcmp(key, "format") == 0) continue;
    fs_value *x = fsV_literal(kf.meta[i].value);
    if (!x) continue; /* not an entry this module wrote */
    fs_value *kv = fsV_cstr(key);
    bool ok = kv && fsV_dict_set(rest, kv, x) == 0;
    if (!kv) fsV_release(x);
    fsV_release(kv);
    if (!ok) {
      fsV_release(rest);
      rest = NULL;
    }
  }
  fsK_close(&kf);
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
  fsK_file kf;
  char *err = NULL;
  if (!mv && !ov) fsV_seterr("load_raw(): expected a module or an optimizer, got %s", fsV_type_name(s[1]));
  else if (fsE_fabric_issues(E, a, &iss, fsF_check_load_raw(&fv->f, ov != NULL, &iss)) < 0) {
  } else if (fsK_open(&kf, s[0]->u.str.s, &err) < 0) {
    fsE_err_own(err);
  } else {
    if ((mv ? load_module(&kf, "", mv, fsV_truthy(s[2])) : load_optim(&kf, "", fv, ov)) == 0) r = fsV_none();
    fsK_close(&kf);
  }
  fsF_issues_free(&iss);
  return r;
}

static const fsE_reg ckpt_funcs[] = {
  {"Fabric.save", ckpt_save}, {"Fabric.load", ckpt_load}, {"Fabric.load_raw", ckpt_load_raw},
  {NULL, NULL},
};
const fsE_lib fsE_lib_ckpt = {"ckpt", ckpt_funcs};
