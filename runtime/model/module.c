/* module.c -- module tree: builders, naming, shapes, init, forward. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "module.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "backend.h"
#include "rng.h"

static const char *const kind_names[FSM__COUNT] = {
  "Sequential", "Residual", "Repeat", "Linear", "Embedding", "PositionalEmbedding",
  "LayerNorm", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Dropout", "Flatten",
  "CausalSelfAttention", "Module", "ModuleList", "Identity", "Parameter",
};

const char *fsM_kind_name(fsM_kind kind) { return kind < FSM__COUNT ? kind_names[kind] : "?"; }

static fs_module *new_module(fsM_kind kind) {
  fs_module *m = calloc(1, sizeof *m);
  if (!m) {
    fsT_seterr("out of memory");
    return NULL;
  }
  m->refcount = 1;
  m->kind = kind;
  m->training = true;
  return m;
}

/* A meta f32 parameter of the given shape. */
static int add_param(fs_module *m, int rank, int64_t d0, int64_t d1) {
  int64_t shape[2] = {d0, d1};
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_META, rank, shape);
  if (!t) return -1;
  t->requires_grad = true;
  m->params[m->nparams++] = t;
  return 0;
}

static bool positive(const char *layer, int64_t v, const char *what) {
  if (v > 0) return true;
  fsT_seterr("%s: %s must be positive, got %lld", layer, what, (long long)v);
  return false;
}

fs_module *fsM_sequential(void) { return new_module(FSM_SEQUENTIAL); }
fs_module *fsM_residual(void) { return new_module(FSM_RESIDUAL); }

fs_module *fsM_linear(int64_t in, int64_t out, bool bias) {
  if (!positive("Linear", in, "in_features") || !positive("Linear", out, "out_features")) return NULL;
  fs_module *m = new_module(FSM_LINEAR);
  if (!m) return NULL;
  m->in = in;
  m->out = out;
  m->bias = bias;
  if (add_param(m, 2, out, in) || (bias && add_param(m, 1, out, 0))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

static fs_module *table(fsM_kind kind, const char *layer, int64_t rows, int64_t dim) {
  if (!positive(layer, rows, kind == FSM_EMBEDDING ? "num_embeddings" : "context") ||
      !positive(layer, dim, "embedding_dim"))
    return NULL;
  fs_module *m = new_module(kind);
  if (!m) return NULL;
  m->in = rows;
  m->out = dim;
  if (add_param(m, 2, rows, dim)) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_embedding(int64_t num, int64_t dim) { return table(FSM_EMBEDDING, "Embedding", num, dim); }
fs_module *fsM_posemb(int64_t context, int64_t dim) { return table(FSM_POSEMB, "PositionalEmbedding", context, dim); }

fs_module *fsM_layernorm(int64_t dim, double eps) {
  if (!positive("LayerNorm", dim, "normalized_shape")) return NULL;
  if (!(eps > 0)) {
    fsT_seterr("LayerNorm: eps must be positive, got %g", eps);
    return NULL;
  }
  fs_module *m = new_module(FSM_LAYERNORM);
  if (!m) return NULL;
  m->in = m->out = dim;
  m->p = eps;
  if (add_param(m, 1, dim, 0) || add_param(m, 1, dim, 0)) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_activation(fsM_kind kind) {
  if (kind != FSM_RELU && kind != FSM_TANH && kind != FSM_SIGMOID && kind != FSM_SILU &&
      kind != FSM_FLATTEN && kind != FSM_GELU) {
    fsT_seterr("%s is not a parameterless activation", fsM_kind_name(kind));
    return NULL;
  }
  return new_module(kind);
}

fs_module *fsM_gelu(bool tanh_approx) {
  fs_module *m = new_module(FSM_GELU);
  if (m) m->tanh_approx = tanh_approx;
  return m;
}

fs_module *fsM_dropout(double p) {
  if (!(p >= 0 && p <= 1)) {
    fsT_seterr("dropout probability has to be between 0 and 1, but got %g", p);
    return NULL;
  }
  fs_module *m = new_module(FSM_DROPOUT);
  if (m) m->p = p;
  return m;
}

fs_module *fsM_attention(int64_t dim, int64_t heads, bool bias) {
  if (!positive("CausalSelfAttention", dim, "dim") || !positive("CausalSelfAttention", heads, "heads"))
    return NULL;
  if (dim % heads) {
    fsT_seterr("CausalSelfAttention: dim %lld is not divisible by heads %lld",
               (long long)dim, (long long)heads);
    return NULL;
  }
  fs_module *m = new_module(FSM_ATTENTION);
  if (!m) return NULL;
  m->in = dim;
  m->out = heads;
  m->bias = bias;
  if (fsM_append(m, "c_attn", fsM_linear(dim, 3 * dim, bias)) ||
      fsM_append(m, "c_proj", fsM_linear(dim, dim, bias))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

/* Containers and the attention's fixed children share the kids array;
 * fsM_append is public for Sequential and Residual only. */
int fsM_append(fs_module *seq, const char *key, fs_module *child) {
  if (!child) return -1; /* a failed builder: its error stands */
  char idx[24];
  if (!key) {
    snprintf(idx, sizeof idx, "%d", seq->nkids);
    key = idx;
  }
  for (int i = 0; i < seq->nkids; i++)
    if (!strcmp(seq->kids[i]->key, key)) {
      fsT_seterr("duplicate layer name '%s'", key);
      fsM_release(child);
      return -1;
    }
  if (seq->nkids == seq->capkids) {
    int cap = seq->capkids ? 2 * seq->capkids : 4;
    fs_module **kids = realloc(seq->kids, (size_t)cap * sizeof *kids);
    if (!kids) {
      fsT_seterr("out of memory");
      fsM_release(child);
      return -1;
    }
    seq->kids = kids;
    seq->capkids = cap;
  }
  free(child->key);
  if (!(child->key = strdup(key))) {
    fsT_seterr("out of memory");
    fsM_release(child);
    return -1;
  }
  child->named = key != idx;
  seq->kids[seq->nkids++] = child;
  return 0;
}

fs_module *fsM_container(fsM_kind kind) {
  if (kind != FSM_SEQUENTIAL && kind != FSM_MODULELIST && kind != FSM_IDENTITY) {
    fsT_seterr("%s is not a container", fsM_kind_name(kind));
    return NULL;
  }
  return new_module(kind);
}

fs_module *fsM_param_holder(fs_tensor *t) {
  fs_module *m = new_module(FSM_PARAM);
  if (!m) return NULL;
  m->params[m->nparams++] = fsT_retain(t);
  return m;
}

fs_module *fsM_custom_new(fsM_custom *hook) {
  fs_module *m = new_module(FSM_CUSTOM);
  if (!m) {
    hook->release(hook);
    return NULL;
  }
  m->custom = hook;
  return m;
}

int fsM_set_child(fs_module *m, const char *key, fs_module *child) {
  if (!child) return -1;
  for (int i = 0; i < m->nkids; i++)
    if (!strcmp(m->kids[i]->key, key)) {
      char *k = strdup(key);
      if (!k) {
        fsT_seterr("out of memory");
        fsM_release(child);
        return -1;
      }
      free(child->key);
      child->key = k;
      child->named = true;
      fsM_release(m->kids[i]);
      m->kids[i] = child;
      return 0;
    }
  if (fsM_append(m, key, child) < 0) return -1;
  int at = m->nkids - 1; /* a parameter goes before the modules */
  for (; child->kind == FSM_PARAM && at > 0 && m->kids[at - 1]->kind != FSM_PARAM; at--) m->kids[at] = m->kids[at - 1];
  m->kids[at] = child;
  return 0;
}

fs_module *fsM_repeat(int64_t n, fs_module *body) {
  if (!body) return NULL;
  if (n < 0) {
    fsT_seterr("repeat count must be non-negative, got %lld", (long long)n);
    fsM_release(body);
    return NULL;
  }
  if (body->kind == FSM_SEQUENTIAL && body->nkids == 1 && !body->kids[0]->named) {
    fs_module *only = fsM_retain(body->kids[0]);
    fsM_release(body);
    body = only;
  }
  fs_module *m = new_module(FSM_REPEAT);
  if (m) m->in = n;
  for (int64_t i = 0; m && i < n; i++)
    if (fsM_append(m, NULL, fsM_clone(body))) {
      fsM_release(m);
      m = NULL;
    }
  fsM_release(body);
  return m;
}

fs_module *fsM_clone(const fs_module *src) {
  if (src->kind == FSM_CUSTOM) { /* its attributes are the evaluator's values */
    fsT_seterr("%s cannot be repeated yet: create one instance per use", src->custom->class_name);
    return NULL;
  }
  fs_module *m = new_module(src->kind);
  if (!m) return NULL;
  fs_module **kids = m->kids;
  *m = *src;
  m->refcount = 1;
  m->key = NULL;
  m->kids = kids;
  m->nkids = m->capkids = 0;
  m->nparams = 0;
  for (int i = 0; i < src->nparams; i++) {
    fs_tensor *t = src->params[i]->data ? fsT_copy(src->params[i])
                                        : fsT_new(FS_F32, FS_DEV_META, src->params[i]->rank, src->params[i]->shape);
    if (!t) {
      fsM_release(m);
      return NULL;
    }
    t->requires_grad = true;
    m->params[m->nparams++] = t;
  }
  for (int i = 0; i < src->nkids; i++)
    if (fsM_append(m, src->kids[i]->named ? src->kids[i]->key : NULL, fsM_clone(src->kids[i]))) {
      fsM_release(m);
      return NULL;
    }
  return m;
}

fs_module *fsM_retain(fs_module *m) {
  if (m) m->refcount++;
  return m;
}

void fsM_release(fs_module *m) {
  if (!m || --m->refcount > 0) return;
  for (int i = 0; i < m->nkids; i++) fsM_release(m->kids[i]);
  for (int i = 0; i < m->nparams; i++) fsT_release(m->params[i]);
  if (m->custom) m->custom->release(m->custom);
  free(m->kids);
  free(m->key);
  free(m);
}

/* ---- walking with state-dict names ---- */

static const char *const leaf_param_names[FSM__COUNT][FSM_MAX_PARAMS] = {
  [FSM_LINEAR] = {"weight", "bias"},
  [FSM_EMBEDDING] = {"weight"},
  [FSM_POSEMB] = {"weight"},
  [FSM_LAYERNORM] = {"weight", "bias"},
};

int fsM_param_index(const fs_module *m, const char *name) {
  for (int i = 0; m->kind < FSM__COUNT && i < FSM_MAX_PARAMS; i++)
    if (leaf_param_names[m->kind][i] && strcmp(leaf_param_names[m->kind][i], name) == 0) return i;
  return -1;
}

int fsM_tie_param(fs_module *m, int i, fs_tensor *t) {
  fs_tensor *old = m->params[i];
  if (!fsT_same_shape(old, t) || old->dtype != t->dtype) {
    char a[96], b[96];
    fsT_seterr("cannot tie %s's %s of shape %s to a tensor of shape %s", fsM_kind_name(m->kind),
               leaf_param_names[m->kind][i], fsT_shape_str(old, a, sizeof a), fsT_shape_str(t, b, sizeof b));
    return -1;
  }
  m->params[i] = fsT_retain(t);
  fsT_release(old);
  return 0;
}

typedef int (*visit_fn)(fs_module *m, const char *prefix, void *ud);

/* Pre-order walk; prefix is the module's full key with a trailing '.' ("" at
 * the root).  Stops at the first nonzero return. */
static int walk(fs_module *m, char *prefix, size_t len, size_t cap, visit_fn fn, void *ud) {
  int rc = fn(m, prefix, ud);
  for (int i = 0; !rc && i < m->nkids; i++) {
    size_t kl = strlen(m->kids[i]->key);
    if (len + kl + 2 > cap) {
      fsT_seterr("module nesting too deep");
      return -1;
    }
    memcpy(prefix + len, m->kids[i]->key, kl);
    prefix[len + kl] = '.';
    prefix[len + kl + 1] = '\0';
    rc = walk(m->kids[i], prefix, len + kl + 1, cap, fn, ud);
    prefix[len] = '\0';
  }
  return rc;
}

#define NAME_CAP 1024

static int walk_root(fs_module *m, visit_fn fn, void *ud) {
  char prefix[NAME_CAP] = "";
  return walk(m, prefix, 0, NAME_CAP, fn, ud);
}

static void param_name(char *buf, size_t cap, const char *prefix, const fs_module *m, int i) {
  if (m->kind == FSM_PARAM) { /* "norm.weight." names "norm.weight" */
    snprintf(buf, cap, "%.*s", (int)(strlen(prefix) ? strlen(prefix) - 1 : 0), prefix);
    return;
  }
  snprintf(buf, cap, "%s%s", prefix, leaf_param_names[m->kind][i]);
}

typedef struct { fsM_param *v; int64_t n, cap; bool every_name; } plist;

static int collect(fs_module *m, const char *prefix, void *ud) {
  plist *l = ud;
  for (int i = 0; i < m->nparams; i++) {
    bool seen = false; /* a parameter held twice (tied) counts once, under its first name, as torch's */
    for (int64_t j = 0; !l->every_name && j < l->n && !seen; j++) seen = l->v[j].t == m->params[i];
    if (seen) continue;
    if (l->n == l->cap) {
      int64_t cap = l->cap ? 2 * l->cap : 16;
      fsM_param *v = realloc(l->v, (size_t)cap * sizeof *v);
      if (!v) return -1;
      l->v = v;
      l->cap = cap;
    }
    char name[NAME_CAP + 16];
    param_name(name, sizeof name, prefix, m, i);
    fsM_param *p = &l->v[l->n];
    if (!(p->name = strdup(name))) return -1;
    p->t = m->params[i];
    p->owner = m;
    p->index = i;
    l->n++;
  }
  return 0;
}

static int64_t list_params(fs_module *m, fsM_param **out, bool every_name) {
  plist l = {.every_name = every_name};
  if (walk_root(m, collect, &l)) {
    fsM_params_free(l.v, l.n);
    fsT_seterr("out of memory");
    *out = NULL;
    return -1;
  }
  *out = l.v;
  return l.n;
}

int64_t fsM_parameters(fs_module *m, fsM_param **out) { return list_params(m, out, false); }
int64_t fsM_state_params(fs_module *m, fsM_param **out) { return list_params(m, out, true); }

void fsM_params_free(fsM_param *ps, int64_t n) {
  for (int64_t i = 0; i < n; i++) free(ps[i].name);
  free(ps);
}

int64_t fsM_num_parameters(const fs_module *m) {
  fsM_param *ps; /* the listing counts a tied parameter once; the walk writes nothing */
  int64_t n = fsM_parameters((fs_module *)m, &ps), total = 0;
  for (int64_t i = 0; i < n; i++) total += ps[i].t->numel;
  if (n >= 0) fsM_params_free(ps, n);
  return total;
}

void fsM_train(fs_module *m, bool training) {
  m->training = training;
  for (int i = 0; i < m->nkids; i++) fsM_train(m->kids[i], training);
}

/* ---- initialization ---- */

/* PyTorch's reset_parameters: Linear's kaiming_uniform_(a=sqrt(5)) on the
 * weight and its bias rule both come to U(-1/sqrt(in), 1/sqrt(in));
 * Embedding normal_(); PositionalEmbedding (a learned table, like nanoGPT's
 * wpe Embedding) normal_(); LayerNorm ones/zeros. */
static void init_range(const fsB_backend *be, const fs_module *m, int index, uint64_t key,
                       float *dst, size_t offset, size_t n) {
  switch (m->kind) {
  case FSM_LINEAR: {
    float bound = (float)(1.0 / sqrt((double)m->in));
    be->fill_uniform(dst, n, key, offset, -bound, bound);
    break;
  }
  case FSM_LAYERNORM: be->fill(dst, n, index == 0 ? 1.0f : 0.0f); break;
  default: be->fill_normal(dst, n, key, offset, 0.0f, 1.0f); break;
  }
}

int fsM_init_param(const fs_module *owner, int index, const char *name, uint64_t seed,
                   fs_device dev, float *dst, size_t offset, size_t n) {
  const fsB_backend *be = fsB_get(dev);
  if (!be) return -1;
  init_range(be, owner, index, fsR_key(seed, name), dst, offset, n);
  return 0;
}

typedef struct { fs_device dev; uint64_t seed; enum { MAT, EMPTY, RESET, MOVE } what; } init_ctx;

/* t's values onto dev: a new buffer there, the old one freed. */
static int move_param(fs_tensor *t, fs_device dev) {
  const fsB_backend *from = fsB_of(t), *to = fsB_get(dev);
  if (!from || !to) return -1;
  size_t nb = fsT_nbytes(t);
  void *p = to->alloc(nb ? nb : 1);
  if (!p) {
    fsT_seterr("out of memory allocating %zu bytes on %s", nb, fsT_device_name(dev));
    return -1;
  }
  if (fsB_transfer(dev, p, t->device, t->data, nb) < 0) {
    to->free(p, nb ? nb : 1);
    return -1;
  }
  from->free(t->data, nb);
  t->data = p;
  t->device = dev;
  return 0;
}

static int init_visit(fs_module *m, const char *prefix, void *ud) {
  init_ctx *c = ud;
  if (m->kind == FSM_DROPOUT && c->what != EMPTY) {
    char name[NAME_CAP + 16];
    snprintf(name, sizeof name, "%sdropout", prefix);
    m->seed = fsR_key(c->seed, name);
  }
  for (int i = 0; i < m->nparams; i++) {
    fs_tensor *t = m->params[i];
    if (c->what == MOVE) {
      if (t->data && t->device != c->dev && move_param(t, c->dev) < 0) return -1;
      continue;
    }
    if (m->kind == FSM_PARAM && c->what == RESET) continue; /* the script's values: no rule to redo */
    char name[NAME_CAP + 16];
    param_name(name, sizeof name, prefix, m, i);
    if (c->what == EMPTY && t->data) {
      fsB_get(t->device)->free(t->data, fsT_nbytes(t));
      t->data = NULL;
    }
    if (c->what == RESET && !t->data) {
      fsT_seterr("reset_parameters: parameter '%s' is on the meta device; call to_empty first", name);
      return -1;
    }
    if (c->what == MAT && t->data) continue;
    if (!t->data && fsT_alloc_storage(t, c->dev)) return -1;
    if (c->what != EMPTY && t->device != FS_DEV_META)
      init_range(fsB_of(t), m, i, fsR_key(c->seed, name), fsT_f32(t), 0, (size_t)t->numel);
  }
  return 0;
}

static int init_all(fs_module *m, init_ctx c) {
  if (c.dev != FS_DEV_META && !fsB_get(c.dev)) return -1;
  return walk_root(m, init_visit, &c);
}

int fsM_to_device(fs_module *m, fs_device dev) { return init_all(m, (init_ctx){dev, 0, MOVE}); }

int fsM_materialize(fs_module *m, fs_device dev, uint64_t seed) {
  return init_all(m, (init_ctx){dev, seed, MAT});
}

int fsM_to_empty(fs_module *m, fs_device dev) { return init_all(m, (init_ctx){dev, 0, EMPTY}); }

int fsM_reset_parameters(fs_module *m, uint64_t seed) {
  return init_all(m, (init_ctx){FS_DEV_CPU, seed, RESET});
}

/* ---- static shapes ---- */

__attribute__((format(printf, 5, 6)))
static int shape_err(const fs_module *m, const fs_module **bad, char *err, size_t errlen,
                     const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  *bad = m;
  return -1;
}

static void dim_str(int64_t d, char *buf, size_t n) {
  if (d < 0) snprintf(buf, n, "?");
  else snprintf(buf, n, "%lld", (long long)d);
}

/* Product of dims, -1 when any is unknown. */
static int64_t prod(int rank, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < rank; i++) {
    if (d[i] < 0) return -1;
    p *= d[i];
  }
  return p;
}

static int last_dim_is(const fs_module *m, int rank, const int64_t *in, int64_t want,
                       const fs_module **bad, char *err, size_t errlen) {
  if (rank > 0 && (in[rank - 1] == want || in[rank - 1] < 0)) return 0;
  char s[160];
  fsT_dims_str(rank, in, s, sizeof s);
  if (m->kind == FSM_LINEAR) {
    char r[24], c[24];
    dim_str(rank ? prod(rank - 1, in) : 1, r, sizeof r);
    dim_str(rank ? in[rank - 1] : 1, c, sizeof c);
    return shape_err(m, bad, err, errlen, "mat1 and mat2 shapes cannot be multiplied (%sx%s and %lldx%lld)",
                     r, c, (long long)m->in, (long long)m->out);
  }
  return shape_err(m, bad, err, errlen, "%s expects input with last dimension %lld, got %s",
                   fsM_kind_name(m->kind), (long long)want, s);
}

int fsM_out_shape(const fs_module *m, int in_rank, const int64_t *in,
                  int *out_rank, int64_t *out, const fs_module **bad,
                  char *err, size_t errlen) {
  int64_t cur[FS_MAX_RANK];
  int rank = in_rank;
  char s[160];
  if (rank > FS_MAX_RANK) return shape_err(m, bad, err, errlen, "input has more than %d dimensions", FS_MAX_RANK);
  memcpy(cur, in, (size_t)rank * sizeof *in);
  switch (m->kind) {
  case FSM_SEQUENTIAL:
  case FSM_REPEAT:
  case FSM_RESIDUAL:
    for (int i = 0; i < m->nkids; i++)
      if (fsM_out_shape(m->kids[i], rank, cur, &rank, cur, bad, err, errlen)) return -1;
    if (m->kind == FSM_RESIDUAL && (rank != in_rank || memcmp(cur, in, (size_t)rank * sizeof *in))) {
      char a[160];
      fsT_dims_str(in_rank, in, a, sizeof a);
      fsT_dims_str(rank, cur, s, sizeof s);
      return shape_err(m, bad, err, errlen, "residual: the body's output %s does not match its input %s", s, a);
    }
    if (m->kind == FSM_RESIDUAL) rank = in_rank, memcpy(cur, in, (size_t)rank * sizeof *in);
    break;
  case FSM_LINEAR:
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    cur[rank - 1] = m->out;
    break;
  case FSM_EMBEDDING:
    if (rank >= FS_MAX_RANK) return shape_err(m, bad, err, errlen, "input has too many dimensions");
    cur[rank++] = m->out;
    break;
  case FSM_POSEMB:
    if (rank < 2) {
      fsT_dims_str(rank, cur, s, sizeof s);
      return shape_err(m, bad, err, errlen, "PositionalEmbedding expects input [..., T, %lld], got %s",
                       (long long)m->out, s);
    }
    if (last_dim_is(m, rank, cur, m->out, bad, err, errlen)) return -1;
    if (cur[rank - 2] > m->in)
      return shape_err(m, bad, err, errlen, "PositionalEmbedding: sequence length %lld exceeds the context %lld",
                       (long long)cur[rank - 2], (long long)m->in);
    break;
  case FSM_LAYERNORM:
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    break;
  case FSM_ATTENTION:
    if (rank != 3) {
      fsT_dims_str(rank, cur, s, sizeof s);
      return shape_err(m, bad, err, errlen, "CausalSelfAttention expects input [B, T, %lld], got %s",
                       (long long)m->in, s);
    }
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    break;
  case FSM_CUSTOM:
    return shape_err(m, bad, err, errlen, "the output shape of %s's forward is known only by running it",
                     m->custom->class_name);
  case FSM_MODULELIST:
    return shape_err(m, bad, err, errlen, "ModuleList has no forward: call its modules in a forward");
  case FSM_FLATTEN:
    if (rank < 2)
      return shape_err(m, bad, err, errlen, "Dimension out of range (expected to be in range of [%d, %d], but got 1)",
                       rank ? -rank : -1, rank ? rank - 1 : 0);
    cur[1] = prod(rank - 1, cur + 1);
    rank = 2;
    break;
  default: /* elementwise */
    break;
  }
  *out_rank = rank;
  memcpy(out, cur, (size_t)rank * sizeof *cur);
  return 0;
}

/* ---- forward ---- */

static fs_tensor *forward_seq(fs_module *m, fs_tensor *x) {
  fs_tensor *cur = fsT_retain(x);
  for (int i = 0; cur && i < m->nkids; i++) {
    fs_tensor *next = fsM_forward(m->kids[i], cur);
    fsT_release(cur);
    cur = next;
  }
  return cur;
}

static const fsN_act act_of[FSM__COUNT] = {
  [FSM_RELU] = FSN_RELU, [FSM_TANH] = FSN_TANH, [FSM_SIGMOID] = FSN_SIGMOID, [FSM_SILU] = FSN_SILU,
};

fs_tensor *fsM_forward(fs_module *m, fs_tensor *x) {
  fs_tensor **p = m->params;
  switch (m->kind) {
  case FSM_SEQUENTIAL:
  case FSM_REPEAT:
    return forward_seq(m, x);
  case FSM_RESIDUAL: {
    fs_tensor *y = forward_seq(m, x), *out = NULL;
    if (y && !fsT_same_shape(x, y)) {
      char a[96], b[96];
      fsT_seterr("residual: the body's output %s does not match its input %s",
                 fsT_shape_str(y, b, sizeof b), fsT_shape_str(x, a, sizeof a));
    } else if (y) {
      out = fsG_binary(FSB_ADD, x, y);
    }
    fsT_release(y);
    return out;
  }
  case FSM_LINEAR: return fsG_linear(x, p[0], m->bias ? p[1] : NULL);
  case FSM_EMBEDDING: return fsG_embedding(x, p[0]);
  case FSM_POSEMB: return fsG_posemb(x, p[0]);
  case FSM_LAYERNORM: return fsG_layernorm(x, p[0], p[1], m->p);
  case FSM_GELU: return fsG_act(m->tanh_approx ? FSN_GELU_TANH : FSN_GELU, x);
  case FSM_RELU:
  case FSM_TANH:
  case FSM_SIGMOID:
  case FSM_SILU:
    return fsG_act(act_of[m->kind], x);
  case FSM_DROPOUT:
    if (!m->training || m->p == 0) return fsT_retain(x);
    return fsG_dropout(x, m->p, fsR_subkey(m->seed, m->calls++));
  case FSM_FLATTEN: {
    if (x->rank < 2) {
      fsT_seterr("Dimension out of range (expected to be in range of [%d, %d], but got 1)",
                 x->rank ? -x->rank : -1, x->rank ? x->rank - 1 : 0);
      return NULL;
    }
    int64_t shape[2] = {x->shape[0], prod(x->rank - 1, x->shape + 1)};
    return fsG_reshape(x, 2, shape);
  }
  case FSM_ATTENTION: {
    if (x->rank != 3) {
      char s[96];
      fsT_seterr("CausalSelfAttention expects input [B, T, %lld], got %s", (long long)m->in,
                 fsT_shape_str(x, s, sizeof s));
      return NULL;
    }
    fs_tensor *qkv = fsM_forward(m->kids[0], x);
    fs_tensor *y = qkv ? fsG_attention(qkv, m->out) : NULL;
    fs_tensor *out = y ? fsM_forward(m->kids[1], y) : NULL;
    fsT_release(qkv);
    fsT_release(y);
    return out;
  }
  case FSM_CUSTOM: return m->custom->forward(m->custom, m, x);
  case FSM_IDENTITY: return fsT_retain(x);
  case FSM_MODULELIST:
    fsT_seterr("Module [ModuleList] is missing the required \"forward\" function");
    return NULL;
  default:
    fsT_seterr("%s has no forward", fsM_kind_name(m->kind));
    return NULL;
  }
}
