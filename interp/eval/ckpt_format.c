/* ckpt_format.c -- the two checkpoint formats behind one table (ck_format):
 * safetensors (runtime/io/safetensors.h), with the checkpoint's tree
 * flattened into dotted names, and PyTorch's (runtime/io/torchckpt.h), which
 * pickles the tree as is.  A load sees either file as one ck_file.  What a
 * checkpoint holds, and fabric.save/load's semantics, are lib_ckpt.c's. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "safetensors.h"
#include "torchckpt.h"

/* ---- safetensors' view of the checkpoint --------------------------------------------- */

static fs_value *ck_value(const fsH_file *f, const fsQ_value *q, int depth);

static int ck_meta(ckpt *c, const char *key, const fsQ_value *q) {
  fs_value *v = ck_value(NULL, q, 0);
  char *text = v ? fsE_ck_own(c, fsV_repr(v)) : NULL;
  fsV_release(v);
  fsK_meta *m = key && text ? fsE_ck_room(c->m, c->nm, &c->capm, sizeof *m) : NULL;
  if (!m) return -1;
  c->m = m;
  c->m[c->nm++] = (fsK_meta){key, text};
  return 0;
}

static bool holds_dict(const fsQ_value *q) {
  for (size_t i = 0; (q->kind == FSQ_LIST || q->kind == FSQ_TUPLE) && i < q->u.seq.n; i++)
    if (q->u.seq.v[i]->kind == FSQ_DICT) return true;
  return false;
}

/* A state dict under name: each tensor an entry "name.key...", each other
 * leaf metadata holding its repr; dicts, and lists of dicts (param_groups),
 * are walked. */
static int ck_flatten_at(ckpt *c, const char *name, const fsQ_value *q) {
  if (!name) return -1;
  if (q->kind == FSQ_TENSOR) {
    fsK_entry *e = fsE_ck_room(c->t, c->nt, &c->capt, sizeof *e);
    if (e) c->t = e;
    const fsQ_value **v = e ? fsE_ck_room(c->tq, c->nt, &c->captq, sizeof *v) : NULL;
    if (!v) return -1;
    c->tq = v;
    c->tq[c->nt] = q;
    c->t[c->nt++] = (fsK_entry){name, q->u.t.dtype, q->u.t.ndim, q->u.t.shape, q->u.t.data};
    return 0;
  }
  bool dict = q->kind == FSQ_DICT;
  if (!dict && !holds_dict(q)) return ck_meta(c, name, q);
  for (size_t i = 0; i < (dict ? q->u.dict.n : q->u.seq.n); i++) {
    const fsQ_value *k = dict ? q->u.dict.k[i] : NULL, *v = dict ? q->u.dict.v[i] : q->u.seq.v[i];
    char *sub = !k ? fsE_ck_fmt(c, "%s.%zu", name, i)
                : k->kind == FSQ_STR ? fsE_ck_fmt(c, "%s.%s", name, k->u.str.s)
                                     : fsE_ck_fmt(c, "%s.%lld", name, (long long)k->u.i);
    if (ck_flatten_at(c, sub, v) < 0) return -1;
  }
  return 0;
}

/* The safetensors layout: state dicts flattened; a plain entry K is metadata
 * K holding its repr (read back as a Python literal). */
int fsE_ck_flatten(ckpt *c) {
  const fsQ_value *root = c->doc->root;
  for (size_t i = 0; i < root->u.dict.n; i++) {
    const char *k = root->u.dict.k[i]->u.str.s;
    if (!c->plain[i]) {
      if (ck_flatten_at(c, k, root->u.dict.v[i]) < 0) return -1;
      continue;
    }
    char *text = fsE_ck_own(c, fsV_repr(c->plain[i]));
    fsK_meta *m = text ? fsE_ck_room(c->m, c->nm, &c->capm, sizeof *m) : NULL;
    if (!m) return -1;
    c->m = m;
    c->m[c->nm++] = (fsK_meta){k, text};
  }
  return 0;
}

/* ---- the two formats --------------------------------------------------------------- */

/* A tensor of the file as a new cpu tensor value. */
static fs_value *ck_read_value(const ck_file *f, const fsK_info *in) {
  fs_tensor *t = fsT_new(in->dtype, FS_DEV_CPU, in->ndim, in->shape);
  char *err = NULL;
  if (!t) return fsE_rt_fail();
  if (f->fmt->read(f, in, 0, in->numel, in->dtype, t->data, &err) < 0) {
    fsT_release(t);
    return fsE_err_own(err);
  }
  return fsE_tensor_value(t);
}

static int st_create(ck_writer *w, const char *path, ckpt *c, char **err) {
  if (fsE_ck_flatten(c) < 0) return -1;
  if (fsK_create(&w->k, path, c->t, c->nt, c->m, c->nm, err) < 0) return -1;
  for (size_t i = 0; i < c->nt; i++) {
    uint64_t numel = c->tq[i]->u.t.numel;
    if (c->t[i].data && fsK_write(&w->k, c->t[i].name, 0, numel, c->t[i].data, err) < 0) {
      fsK_abort(&w->k);
      return -1;
    }
  }
  return 0;
}
static int st_attach(ck_writer *w, const char *tmp, ckpt *c, char **err) {
  return fsE_ck_flatten(c) < 0 ? -1 : fsK_attach(&w->k, tmp, err);
}
static const char *st_tmp_path(const ck_writer *w) { return fsK_tmp_path(&w->k); }
static int st_write(ck_writer *w, const ckpt *c, const fsQ_value *t, uint64_t first, uint64_t count,
                    const void *src, char **err) {
  size_t i = 0;
  while (c->tq[i] != t) i++; /* every slice's tensor is in the view */
  return fsK_write(&w->k, c->t[i].name, first, count, src, err);
}
static int st_commit(ck_writer *w, char **err) { return fsK_commit(&w->k, err); }
static void st_abort(ck_writer *w) { fsK_abort(&w->k); }
static int st_open(ck_file *f, const char *path, char **err) { return fsK_open(&f->k, path, err); }
static void st_close(ck_file *f) { fsK_close(&f->k); }
static int st_read(const ck_file *f, const fsK_info *t, uint64_t first, uint64_t count, fs_dtype dt, void *dst,
                   char **err) {
  return fsK_read(&f->k, t, first, count, dt, dst, err);
}
static int st_get_name(const ck_file *f, const char *name, int depth, fs_value **out);

/* The child of prefix (its length pl) that entry name starts, copied into
 * seg; 0 when name is not under prefix. */
static int child_of(const char *name, const char *prefix, size_t pl, char *seg, size_t len) {
  if (strncmp(name, prefix, pl) || name[pl] != '.') return 0;
  snprintf(seg, len, "%.*s", (int)strcspn(name + pl + 1, "."), name + pl + 1);
  return 1;
}

/* No entry is named prefix: the dict its dotted descendants make, as the
 * flattening wrote a state dict ("p.k..." under key k), or absent. */
static int st_unflatten(const ck_file *f, const char *prefix, int depth, fs_value **out) {
  size_t pl = strlen(prefix), total = f->k.nmeta + f->k.n;
  fs_value *d = NULL;
  *out = NULL;
  if (depth > 16) return 0;
  for (size_t i = 0; i < total; i++) {
    const char *name = i < f->k.nmeta ? f->k.meta[i].key : f->k.t[i - f->k.nmeta].name;
    char seg[256], sub[1024];
    if (!child_of(name, prefix, pl, seg, sizeof seg) || (d && fsV_dict_getstr(d, seg))) continue;
    snprintf(sub, sizeof sub, "%s.%s", prefix, seg);
    fs_value *x = NULL, *k = NULL;
    int got = st_get_name(f, sub, depth + 1, &x);
    if (got > 0 && (d || (d = fsV_dict())) && (k = fsV_cstr(seg)) && fsV_dict_set(d, k, x) == 0) x = NULL;
    else if (got > 0) got = -1;
    fsV_release(k);
    fsV_release(x);
    if (got < 0) {
      fsV_release(d);
      return -1;
    }
  }
  return (*out = d) != NULL;
}

static int st_get_name(const ck_file *f, const char *name, int depth, fs_value **out) {
  const fsK_info *in = fsK_find(&f->k, name);
  const char *text = in ? NULL : fsK_meta_get(&f->k, name);
  if (in) return (*out = ck_read_value(f, in)) ? 1 : -1;
  if (!text) return st_unflatten(f, name, depth, out);
  if ((*out = fsV_literal(text))) return 1;
  char why[512]; /* a value fabric.save wrote is a repr: anything else is a damaged file */
  snprintf(why, sizeof why, "%s", fsV_error());
  fsV_seterr("%s: the metadata of '%s' is not a Python literal (%s): %.60s", f->k.path, name, why, text);
  return -1;
}

static int st_get(const ck_file *f, const char *const *path, int n, fs_value **out) {
  char name[1024] = "";
  for (int i = 0; i < n; i++) snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", i ? "." : "", path[i]);
  return st_get_name(f, name, 0, out);
}
static size_t st_nkeys(const ck_file *f) { return f->k.nmeta; }
static const char *st_key(const ck_file *f, size_t i) {
  const char *k = f->k.meta[i].key;
  return strchr(k, '.') || strcmp(k, "format") == 0 ? NULL : k;
}

static const ck_format ck_safetensors = {
  st_create, st_attach, st_tmp_path, st_write, st_commit, st_abort,
  st_open, st_close, st_read, st_get, st_nkeys, st_key,
};

static int th_create(ck_writer *w, const char *path, ckpt *c, char **err) {
  return fsH_create(&w->h, path, c->doc->root, err);
}
static int th_attach(ck_writer *w, const char *tmp, ckpt *c, char **err) {
  return fsH_attach(&w->h, tmp, c->doc->root, err);
}
static const char *th_tmp_path(const ck_writer *w) { return fsH_tmp_path(&w->h); }
static int th_write(ck_writer *w, const ckpt *c, const fsQ_value *t, uint64_t first, uint64_t count,
                    const void *src, char **err) {
  (void)c;
  return fsH_write(&w->h, t, first, count, src, err);
}
static int th_commit(ck_writer *w, char **err) { return fsH_commit(&w->h, err); }
static void th_abort(ck_writer *w) { fsH_abort(&w->h); }

typedef struct th_index { fsK_info *t; const fsQ_value **q; size_t n, cap, capq; } th_index;

static int by_info_name(const void *a, const void *b) {
  return strcmp((*(const fsK_info *const *)a)->name, (*(const fsK_info *const *)b)->name);
}

/* Every tensor of the tree under its dotted name (dict keys, list indices). */
static int th_collect(th_index *x, const char *name, const fsQ_value *q) {
  bool dict = q->kind == FSQ_DICT, seq = q->kind == FSQ_TUPLE || q->kind == FSQ_LIST;
  if (q->kind == FSQ_TENSOR) {
    fsK_info *t = fsE_ck_room(x->t, x->n, &x->cap, sizeof *t);
    if (t) x->t = t;
    const fsQ_value **v = t ? fsE_ck_room(x->q, x->n, &x->capq, sizeof *v) : NULL;
    char *copy = v ? strdup(name) : NULL;
    if (!copy) return -1;
    x->q = v;
    x->q[x->n] = q;
    x->t[x->n] = (fsK_info){.name = copy, .dtype = q->u.t.dtype, .ndim = q->u.t.ndim, .numel = q->u.t.numel};
    memcpy(x->t[x->n++].shape, q->u.t.shape, sizeof q->u.t.shape);
    return 0;
  }
  for (size_t i = 0; (dict || seq) && i < (dict ? q->u.dict.n : q->u.seq.n); i++) {
    const fsQ_value *k = dict ? q->u.dict.k[i] : NULL;
    char sub[1024];
    if (k && k->kind == FSQ_STR) snprintf(sub, sizeof sub, "%s%s%s", name, *name ? "." : "", k->u.str.s);
    else if (k && k->kind == FSQ_INT) snprintf(sub, sizeof sub, "%s%s%lld", name, *name ? "." : "", (long long)k->u.i);
    else if (k) continue; /* a key no state dict has */
    else snprintf(sub, sizeof sub, "%s%s%zu", name, *name ? "." : "", i);
    if (th_collect(x, sub, dict ? q->u.dict.v[i] : q->u.seq.v[i]) < 0) return -1;
  }
  return 0;
}

static int th_open(ck_file *f, const char *path, char **err) {
  th_index x = {0};
  fsK_info **order = NULL;
  f->k.fd = -1;
  if (fsH_open(&f->h, path, err) < 0) return -1;
  int rc = th_collect(&x, "", f->h.doc->root);
  if (rc == 0 && (order = calloc(x.n + 1, sizeof *order)) && (f->k.t = calloc(x.n + 1, sizeof *f->k.t)) &&
      (f->qt = calloc(x.n + 1, sizeof *f->qt)) && (f->k.path = strdup(path))) {
    for (size_t i = 0; i < x.n; i++) order[i] = &x.t[i];
    qsort(order, x.n, sizeof *order, by_info_name); /* fsK_find's bsearch */
    for (size_t i = 0; i < x.n; i++) {
      f->k.t[i] = *order[i];
      f->qt[i] = x.q[order[i] - x.t];
    }
    f->k.n = x.n;
    x.n = 0;
  } else {
    rc = -1;
  }
  for (size_t i = 0; i < x.n; i++) free(x.t[i].name);
  free(x.t);
  free(x.q);
  free(order);
  if (rc < 0) {
    fsK_close(&f->k);
    free(f->qt);
    fsH_close(&f->h);
    *err = NULL; /* out of memory */
  }
  return rc;
}
static void th_close(ck_file *f) {
  fsK_close(&f->k);
  free(f->qt);
  fsH_close(&f->h);
}
static int th_read(const ck_file *f, const fsK_info *t, uint64_t first, uint64_t count, fs_dtype dt, void *dst,
                   char **err) {
  return fsH_read(&f->h, f->qt[t - f->k.t], first, count, dt, dst, err);
}

/* A value of the file as the language's value (tensors read into new cpu tensors). */
static fs_value *ck_value(const fsH_file *f, const fsQ_value *q, int depth) {
  fs_value *v = NULL;
  size_t n = q->kind == FSQ_DICT ? q->u.dict.n : q->u.seq.n;
  switch (q->kind) {
  case FSQ_NONE: return fsV_none();
  case FSQ_BOOL: return fsV_bool(q->u.b);
  case FSQ_INT: return fsV_int(q->u.i);
  case FSQ_FLOAT: return fsV_float(q->u.f);
  case FSQ_STR: return fsV_str(q->u.str.s, q->u.str.len);
  case FSQ_LIST:
    v = fsV_list(n);
    for (size_t i = 0; v && i < n; i++)
      if (fsV_list_append(v, ck_value(f, q->u.seq.v[i], depth + 1)) < 0) v = (fsV_release(v), NULL);
    return v;
  case FSQ_TUPLE:
    v = fsV_tuple(n);
    for (size_t i = 0; v && i < n; i++) {
      fs_value *x = ck_value(f, q->u.seq.v[i], depth + 1);
      if (x) fsV_seq_set(v, i, x);
      else v = (fsV_release(v), NULL);
    }
    return v;
  case FSQ_DICT:
    v = fsV_dict();
    for (size_t i = 0; v && i < n; i++) {
      fs_value *k = ck_value(f, q->u.dict.k[i], depth + 1), *x = k ? ck_value(f, q->u.dict.v[i], depth + 1) : NULL;
      if (!x || fsV_dict_set(v, k, x) < 0) v = (fsV_release(v), NULL);
      fsV_release(k);
    }
    return v;
  case FSQ_TENSOR: {
    fs_tensor *t = f ? fsT_new(q->u.t.dtype, FS_DEV_CPU, q->u.t.ndim, q->u.t.shape) : NULL;
    char *err = NULL;
    if (!t) return f ? fsE_rt_fail() : (fsV_seterr("a tensor cannot be metadata"), NULL);
    if (fsH_read(f, q, 0, q->u.t.numel, q->u.t.dtype, t->data, &err) < 0) {
      fsT_release(t);
      return fsE_err_own(err);
    }
    return fsE_tensor_value(t);
  }
  default:
    fsV_seterr("a %s cannot be loaded", fsQ_kind_name(q->kind));
    return NULL;
  }
}

static int th_get(const ck_file *f, const char *const *path, int n, fs_value **out) {
  const fsQ_value *q = f->h.doc->root;
  for (int i = 0; q && i < n; i++) {
    char *end;
    long long k = strtoll(path[i], &end, 10);
    bool num = *path[i] && !*end;
    const fsQ_value *x = fsQ_get(q, path[i]);
    if (!x && num) x = fsQ_get_int(q, k);
    if (!x && num && (q->kind == FSQ_LIST || q->kind == FSQ_TUPLE) && k >= 0 && (size_t)k < q->u.seq.n)
      x = q->u.seq.v[k];
    q = x;
  }
  *out = q ? ck_value(&f->h, q, 0) : NULL;
  return !q ? 0 : *out ? 1 : -1;
}
static size_t th_nkeys(const ck_file *f) {
  const fsQ_value *r = f->h.doc->root;
  return r->kind == FSQ_DICT ? r->u.dict.n : 0;
}
static const char *th_key(const ck_file *f, size_t i) {
  const fsQ_value *k = f->h.doc->root->u.dict.k[i];
  return k->kind == FSQ_STR ? k->u.str.s : NULL;
}

static const ck_format ck_torch = {
  th_create, th_attach, th_tmp_path, th_write, th_commit, th_abort,
  th_open, th_close, th_read, th_get, th_nkeys, th_key,
};

const ck_format *fsE_ck_format_of(const char *path) {
  return fsH_is_torch_path(path) ? &ck_torch : &ck_safetensors;
}

int fsE_ck_open(ck_file *f, const char *path) {
  char *err = NULL;
  memset(f, 0, sizeof *f);
  f->fmt = fsE_ck_format_of(path);
  if (f->fmt->open(f, path, &err) == 0) return 0;
  fsE_err_own(err);
  return -1;
}
