/* module.c -- module tree: builders, naming, shapes, init, forward (the layers
 * of issue 14 build, shape and run in layers.c, through model_int.h). */
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
#include "model_int.h"

static const char *const kind_names[FSM__COUNT] = {
  "Sequential", "Residual", "Repeat", "Linear", "Embedding", "PositionalEmbedding",
  "LayerNorm", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Dropout", "Flatten",
  "CausalSelfAttention", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d", "MaxPool2d",
  "AvgPool2d", "AdaptiveAvgPool2d", "LeakyReLU", "Softmax", "Mish", "GroupNorm", "RMSNorm",
  "Upsample", "ConvTranspose2d", "MultiheadAttention",
  "Module", "ModuleList", "Identity", "Parameter", "ModuleDict", "Buffer",
};

const char *fsM_kind_name(fsM_kind kind) { return kind < FSM__COUNT ? kind_names[kind] : "?"; }

fs_module *fsM_new_module(fsM_kind kind) {
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
int fsM_add_param_shape(fs_module *m, int rank, const int64_t *shape) {
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_META, rank, shape);
  if (!t) return -1;
  t->requires_grad = true;
  m->params[m->nparams++] = t;
  return 0;
}

int fsM_add_param(fs_module *m, int rank, int64_t d0, int64_t d1) {
  int64_t shape[2] = {d0, d1};
  return fsM_add_param_shape(m, rank, shape);
}

/* A meta buffer (no grad): rank 1 of n elements, or rank 0 */
int fsM_add_buffer(fs_module *m, fs_dtype dt, int rank, int64_t n) {
  fs_tensor *t = fsT_new(dt, FS_DEV_META, rank, &n);
  if (!t) return -1;
  m->buffers[m->nbuffers++] = t;
  return 0;
}

bool fsM_positive(const char *layer, int64_t v, const char *what) {
  if (v > 0) return true;
  fsT_seterr("%s: %s must be positive, got %lld", layer, what, (long long)v);
  return false;
}

fs_module *fsM_sequential(void) { return fsM_new_module(FSM_SEQUENTIAL); }
fs_module *fsM_residual(void) { return fsM_new_module(FSM_RESIDUAL); }

fs_module *fsM_linear(int64_t in, int64_t out, bool bias) {
  if (!fsM_positive("Linear", in, "in_features") || !fsM_positive("Linear", out, "out_features")) return NULL;
  fs_module *m = fsM_new_module(FSM_LINEAR);
  if (!m) return NULL;
  m->in = in;
  m->out = out;
  m->bias = bias;
  if (fsM_add_param(m, 2, out, in) || (bias && fsM_add_param(m, 1, out, 0))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

static fs_module *table(fsM_kind kind, const char *layer, int64_t rows, int64_t dim) {
  if (!fsM_positive(layer, rows, kind == FSM_EMBEDDING ? "num_embeddings" : "context") ||
      !fsM_positive(layer, dim, "embedding_dim"))
    return NULL;
  fs_module *m = fsM_new_module(kind);
  if (!m) return NULL;
  m->in = rows;
  m->out = dim;
  if (fsM_add_param(m, 2, rows, dim)) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_embedding(int64_t num, int64_t dim) { return table(FSM_EMBEDDING, "Embedding", num, dim); }
fs_module *fsM_posemb(int64_t context, int64_t dim) { return table(FSM_POSEMB, "PositionalEmbedding", context, dim); }

fs_module *fsM_layernorm(int64_t dim, double eps) {
  if (!fsM_positive("LayerNorm", dim, "normalized_shape")) return NULL;
  if (!(eps > 0)) {
    fsT_seterr("LayerNorm: eps must be positive, got %g", eps);
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_LAYERNORM);
  if (!m) return NULL;
  m->in = m->out = dim;
  m->p = eps;
  if (fsM_add_param(m, 1, dim, 0) || fsM_add_param(m, 1, dim, 0)) {
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
  return fsM_new_module(kind);
}

fs_module *fsM_gelu(bool tanh_approx) {
  fs_module *m = fsM_new_module(FSM_GELU);
  if (m) m->tanh_approx = tanh_approx;
  return m;
}

fs_module *fsM_dropout(double p) {
  if (!(p >= 0 && p <= 1)) {
    fsT_seterr("dropout probability has to be between 0 and 1, but got %g", p);
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_DROPOUT);
  if (m) m->p = p;
  return m;
}

fs_module *fsM_attention(int64_t dim, int64_t heads, bool bias) {
  if (!fsM_positive("CausalSelfAttention", dim, "dim") || !fsM_positive("CausalSelfAttention", heads, "heads"))
    return NULL;
  if (dim % heads) {
    fsT_seterr("CausalSelfAttention: dim %lld is not divisible by heads %lld",
               (long long)dim, (long long)heads);
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_ATTENTION);
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
  if (kind != FSM_SEQUENTIAL && kind != FSM_MODULELIST && kind != FSM_MODULEDICT && kind != FSM_IDENTITY) {
    fsT_seterr("%s is not a container", fsM_kind_name(kind));
    return NULL;
  }
  return fsM_new_module(kind);
}

fs_module *fsM_param_holder(fs_tensor *t) {
  fs_module *m = fsM_new_module(FSM_PARAM);
  if (!m) return NULL;
  m->params[m->nparams++] = fsT_retain(t);
  return m;
}

fs_module *fsM_buffer_holder(fs_tensor *t, bool transient) {
  fs_module *m = fsM_new_module(FSM_BUFFER);
  if (!m) return NULL;
  m->buffers[m->nbuffers++] = fsT_retain(t);
  m->transient = transient;
  return m;
}

fs_module *fsM_custom_new(fsM_custom *hook) {
  fs_module *m = fsM_new_module(FSM_CUSTOM);
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
  /* torch's order: _parameters, then _buffers, then _modules */
  int rank = child->kind == FSM_PARAM ? 0 : child->kind == FSM_BUFFER ? 1 : 2, at = m->nkids - 1;
  for (; at > 0; at--) {
    fsM_kind k = m->kids[at - 1]->kind;
    if ((k == FSM_PARAM ? 0 : k == FSM_BUFFER ? 1 : 2) <= rank) break;
    m->kids[at] = m->kids[at - 1];
  }
  m->kids[at] = child;
  return 0;
}

void fsM_remove_child(fs_module *m, const char *key) {
  for (int i = 0; i < m->nkids; i++)
    if (!strcmp(m->kids[i]->key, key)) {
      fsM_release(m->kids[i]);
      memmove(m->kids + i, m->kids + i + 1, (size_t)(m->nkids - i - 1) * sizeof *m->kids);
      m->nkids--;
      return;
    }
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
  fs_module *m = fsM_new_module(FSM_REPEAT);
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
  fs_module *m = fsM_new_module(src->kind);
  if (!m) return NULL;
  fs_module **kids = m->kids;
  *m = *src;
  m->refcount = 1;
  m->key = NULL;
  m->shard = NULL;
  m->kids = kids;
  m->nkids = m->capkids = 0;
  m->nparams = m->nbuffers = 0;
  for (int i = 0; i < src->nbuffers; i++) {
    const fs_tensor *b = src->buffers[i];
    if (!(m->buffers[i] = b->data ? fsT_copy(b) : fsT_new(b->dtype, FS_DEV_META, b->rank, b->shape))) {
      fsM_release(m);
      return NULL;
    }
    m->nbuffers++;
  }
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
  for (int i = 0; i < m->nbuffers; i++) fsT_release(m->buffers[i]);
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
  [FSM_CONV1D] = {"weight", "bias"},
  [FSM_CONV2D] = {"weight", "bias"},
  [FSM_CONVTRANSPOSE2D] = {"weight", "bias"},
  [FSM_MHA] = {"in_proj_weight", "in_proj_bias"},
  [FSM_BATCHNORM1D] = {"weight", "bias"},
  [FSM_BATCHNORM2D] = {"weight", "bias"},
  [FSM_GROUPNORM] = {"weight", "bias"},
  [FSM_RMSNORM] = {"weight"},
};

static const char *const buffer_names[FSM_MAX_BUFFERS] = {"running_mean", "running_var", "num_batches_tracked"};

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

/* Entry i of a module's state: its parameters, then its buffers. */
static void param_name(char *buf, size_t cap, const char *prefix, const fs_module *m, int i) {
  if (m->kind == FSM_PARAM || m->kind == FSM_BUFFER) { /* "norm.weight." names "norm.weight" */
    snprintf(buf, cap, "%.*s", (int)(strlen(prefix) ? strlen(prefix) - 1 : 0), prefix);
    return;
  }
  snprintf(buf, cap, "%s%s", prefix, i < m->nparams ? leaf_param_names[m->kind][i] : buffer_names[i - m->nparams]);
}

/* STATE: the state dict's view (a tied parameter under each of its names,
 * then the persistent buffers); PARAMS: parameters() (a tied parameter
 * once, under its first name, as torch's); BUFFERS: every buffer */
typedef enum { PARAMS, STATE, BUFFERS } plist_what;
typedef struct { fsM_param *v; int64_t n, cap; plist_what what; } plist;

static int collect(fs_module *m, const char *prefix, void *ud) {
  plist *l = ud;
  int from = l->what == BUFFERS ? m->nparams : 0;
  int to = m->nparams + (l->what == PARAMS || (l->what == STATE && m->transient) ? 0 : m->nbuffers);
  for (int i = from; i < to; i++) {
    bool seen = false;
    for (int64_t j = 0; l->what == PARAMS && j < l->n && !seen; j++) seen = l->v[j].t == m->params[i];
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
    p->t = i < m->nparams ? m->params[i] : m->buffers[i - m->nparams];
    p->owner = m;
    p->index = i;
    l->n++;
  }
  return 0;
}

static int64_t collect_all(fs_module *m, fsM_param **out, plist_what what) {
  plist l = {.what = what};
  if (walk_root(m, collect, &l)) {
    fsM_params_free(l.v, l.n);
    fsT_seterr("out of memory");
    *out = NULL;
    return -1;
  }
  *out = l.v;
  return l.n;
}

int64_t fsM_parameters(fs_module *m, fsM_param **out) { return collect_all(m, out, PARAMS); }
int64_t fsM_state(fs_module *m, fsM_param **out) { return collect_all(m, out, STATE); }
int64_t fsM_buffers(fs_module *m, fsM_param **out) { return collect_all(m, out, BUFFERS); }

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
    if (index == 1 && m->zero_bias_init) be->fill(dst, n, 0.0f);
    else be->fill_uniform(dst, n, key, offset, -bound, bound);
    break;
  }
  case FSM_MHA: { /* xavier_uniform_(in_proj_weight), in_proj_bias 0 */
    float bound = (float)sqrt(6.0 / (double)(m->in + 3 * m->in));
    if (index == 0) be->fill_uniform(dst, n, key, offset, -bound, bound);
    else be->fill(dst, n, 0.0f);
    break;
  }
  case FSM_CONV1D:
  case FSM_CONV2D:
  case FSM_CONVTRANSPOSE2D: { /* kaiming_uniform_(a=sqrt(5)) and the bias rule: U(+-1/sqrt(fan_in)),
                               fan_in = weight.size(1) * kernel: in/groups, or out/groups transposed */
    int64_t per_group = (m->kind == FSM_CONVTRANSPOSE2D ? m->out : m->in) / m->groups;
    float bound = (float)(1.0 / sqrt((double)(per_group * m->kernel[0] * m->kernel[1])));
    be->fill_uniform(dst, n, key, offset, -bound, bound);
    break;
  }
  case FSM_LAYERNORM:
  case FSM_BATCHNORM1D:
  case FSM_BATCHNORM2D:
  case FSM_GROUPNORM:
  case FSM_RMSNORM:
    be->fill(dst, n, index == 0 ? 1.0f : 0.0f);
    break;
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

/* Parameter i of m gets its initial values; a low-precision one (*-true
 * under init_module) gets them drawn in float32 and rounded, as torch's
 * init functions on such tensors draw in float. */
static int init_param(const fs_module *m, int i, uint64_t key, fs_tensor *t) {
  if (t->dtype == FS_F32) {
    init_range(fsB_of(t), m, i, key, fsT_f32(t), 0, (size_t)t->numel);
    return 0;
  }
  fs_tensor *f = fsT_new(FS_F32, t->device, t->rank, t->shape);
  if (!f) return -1;
  init_range(fsB_of(f), m, i, key, fsT_f32(f), 0, (size_t)f->numel);
  int rc = fsT_set_dtype(f, t->dtype);
  if (rc == 0) fsB_of(t)->copy(t->data, f->data, fsT_nbytes(t));
  fsT_release(f);
  return rc;
}

/* A buffer's initial values (BatchNorm's reset_running_stats). */
static int init_buffer(fs_tensor *t, int index) {
  const fsB_backend *be = fsB_of(t);
  if (index != 1) be->zero(t->data, fsT_nbytes(t));
  else if (t->dtype == FS_F32) be->fill(fsT_f32(t), (size_t)t->numel, 1.0f);
  else { /* ones of a low-precision buffer (a *-true BatchNorm's running_var) */
    fs_tensor *f = fsT_new(FS_F32, t->device, t->rank, t->shape);
    if (!f) return -1;
    be->fill(fsT_f32(f), (size_t)f->numel, 1.0f);
    int rc = fsT_set_dtype(f, t->dtype);
    if (rc == 0) be->copy(t->data, f->data, fsT_nbytes(t));
    fsT_release(f);
    return rc;
  }
  return 0;
}

static int buffers_visit(fs_module *m, const init_ctx *c) {
  for (int i = 0; i < m->nbuffers; i++) {
    fs_tensor *t = m->buffers[i];
    if (c->what == MOVE) {
      if (t->data && t->device != c->dev && move_param(t, c->dev) < 0) return -1;
      continue;
    }
    if (m->kind == FSM_BUFFER && c->what == RESET) continue; /* the script's values, as FSM_PARAM's */
    if (c->what == EMPTY && t->data) {
      fsB_get(t->device)->free(t->data, fsT_nbytes(t));
      t->data = NULL;
    }
    if (c->what == MAT && t->data) continue;
    if (!t->data && c->dev != FS_DEV_META && fsT_alloc_storage(t, c->dev)) return -1;
    if (c->what != EMPTY && t->data && init_buffer(t, i) < 0) return -1;
  }
  return 0;
}

static int init_visit(fs_module *m, const char *prefix, void *ud) {
  init_ctx *c = ud;
  if (buffers_visit(m, c) < 0) return -1;
  if ((m->kind == FSM_DROPOUT || m->kind == FSM_MHA) && c->what != EMPTY) {
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
    if (c->what != EMPTY && t->device != FS_DEV_META && init_param(m, i, fsR_key(c->seed, name), t) < 0)
      return -1;
  }
  return 0;
}

static int init_all(fs_module *m, init_ctx c) {
  if (c.dev != FS_DEV_META && !fsB_get(c.dev)) return -1;
  return walk_root(m, init_visit, &c);
}

static int buffers_only(fs_module *m, const char *prefix, void *ud) {
  (void)prefix;
  return buffers_visit(m, ud);
}

int fsM_materialize_buffers(fs_module *m, fs_device dev) {
  init_ctx c = {dev, 0, MAT};
  if (!fsB_get(dev)) return -1;
  return walk_root(m, buffers_only, &c);
}

int fsM_to_device(fs_module *m, fs_device dev) { return init_all(m, (init_ctx){dev, 0, MOVE}); }

int fsM_materialize(fs_module *m, fs_device dev, uint64_t seed) {
  return init_all(m, (init_ctx){dev, seed, MAT});
}

int fsM_to_empty(fs_module *m, fs_device dev) { return init_all(m, (init_ctx){dev, 0, EMPTY}); }

int fsM_reset_parameters(fs_module *m, uint64_t seed) {
  return init_all(m, (init_ctx){FS_DEV_CPU, seed, RESET});
}

/* ---- dtype ---- */

int fsM_to_dtype(fs_module *m, fs_dtype dt) {
  fsM_param *ps;
  int64_t n = fsM_state(m, &ps);
  if (n < 0) return -1;
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < n; i++)
    if (fsT_is_floating(ps[i].t->dtype) && ps[i].t->data) rc = fsT_set_dtype(ps[i].t, dt);
  fsM_params_free(ps, n);
  return rc;
}

/* ---- static shapes ---- */

int fsM_shape_err(const fs_module *m, const fs_module **bad, char *err, size_t errlen,
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
    return fsM_shape_err(m, bad, err, errlen, "mat1 and mat2 shapes cannot be multiplied (%sx%s and %lldx%lld)",
                     r, c, (long long)m->in, (long long)m->out);
  }
  return fsM_shape_err(m, bad, err, errlen, "%s expects input with last dimension %lld, got %s",
                   fsM_kind_name(m->kind), (long long)want, s);
}

int fsM_out_shape(const fs_module *m, int in_rank, const int64_t *in,
                  int *out_rank, int64_t *out, const fs_module **bad,
                  char *err, size_t errlen) {
  int64_t cur[FS_MAX_RANK];
  int rank = in_rank;
  char s[160];
  if (rank > FS_MAX_RANK) return fsM_shape_err(m, bad, err, errlen, "input has more than %d dimensions", FS_MAX_RANK);
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
      return fsM_shape_err(m, bad, err, errlen, "residual: the body's output %s does not match its input %s", s, a);
    }
    if (m->kind == FSM_RESIDUAL) rank = in_rank, memcpy(cur, in, (size_t)rank * sizeof *in);
    break;
  case FSM_LINEAR:
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    cur[rank - 1] = m->out;
    break;
  case FSM_EMBEDDING:
    if (rank >= FS_MAX_RANK) return fsM_shape_err(m, bad, err, errlen, "input has too many dimensions");
    cur[rank++] = m->out;
    break;
  case FSM_POSEMB:
    if (rank < 2) {
      fsT_dims_str(rank, cur, s, sizeof s);
      return fsM_shape_err(m, bad, err, errlen, "PositionalEmbedding expects input [..., T, %lld], got %s",
                       (long long)m->out, s);
    }
    if (last_dim_is(m, rank, cur, m->out, bad, err, errlen)) return -1;
    if (cur[rank - 2] > m->in)
      return fsM_shape_err(m, bad, err, errlen, "PositionalEmbedding: sequence length %lld exceeds the context %lld",
                       (long long)cur[rank - 2], (long long)m->in);
    break;
  case FSM_LAYERNORM:
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    break;
  case FSM_ATTENTION:
    if (rank != 3) {
      fsT_dims_str(rank, cur, s, sizeof s);
      return fsM_shape_err(m, bad, err, errlen, "CausalSelfAttention expects input [B, T, %lld], got %s",
                       (long long)m->in, s);
    }
    if (last_dim_is(m, rank, cur, m->in, bad, err, errlen)) return -1;
    break;
  case FSM_CUSTOM:
    return fsM_shape_err(m, bad, err, errlen, "the output shape of %s's forward is known only by running it",
                     m->custom->class_name);
  case FSM_MODULELIST:
  case FSM_MODULEDICT:
    return fsM_shape_err(m, bad, err, errlen, "%s has no forward: call its modules in a forward",
                         fsM_kind_name(m->kind));
  case FSM_FLATTEN:
    if (rank < 2)
      return fsM_shape_err(m, bad, err, errlen, "Dimension out of range (expected to be in range of [%d, %d], but got 1)",
                       rank ? -rank : -1, rank ? rank - 1 : 0);
    cur[1] = prod(rank - 1, cur + 1);
    rank = 2;
    break;
  case FSM_CONVTRANSPOSE2D:
    if (rank != 4) {
      fsT_dims_str(rank, cur, s, sizeof s);
      return fsM_shape_err(m, bad, err, errlen, "ConvTranspose2d expects input [N, %lld, H, W], got %s", (long long)m->in, s);
    }
    cur[1] = m->out;
    for (int i = 0; i < 2; i++)
      if (cur[2 + i] >= 0)
        cur[2 + i] = (cur[2 + i] - 1) * m->stride[i] - 2 * m->pad[i] + m->dil[i] * (m->kernel[i] - 1) + m->output_pad[i] + 1;
    break;
  case FSM_CONV1D:
  case FSM_CONV2D:
  case FSM_BATCHNORM1D:
  case FSM_BATCHNORM2D:
  case FSM_MAXPOOL2D:
  case FSM_AVGPOOL2D:
  case FSM_ADAPTIVEAVGPOOL2D:
  case FSM_UPSAMPLE:
    if (fsM_spatial_shape(m, &rank, cur, bad, err, errlen)) return -1;
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
  case FSM_CONV1D:
    return fsG_conv(1, x, p[0], m->bias ? p[1] : NULL, m->stride + 1, m->pad + 1, m->dil + 1, m->groups);
  case FSM_CONV2D:
    return fsG_conv(2, x, p[0], m->bias ? p[1] : NULL, m->stride, m->pad, m->dil, m->groups);
  case FSM_BATCHNORM1D:
  case FSM_BATCHNORM2D:
    return fsM_batchnorm_forward(m, x);
  case FSM_MAXPOOL2D: return fsG_max_pool2d(x, m->kernel, m->stride, m->pad, m->dil, m->ceil_mode);
  case FSM_AVGPOOL2D:
    return fsG_avg_pool2d(x, m->kernel, m->stride, m->pad, m->ceil_mode, m->count_include_pad);
  case FSM_ADAPTIVEAVGPOOL2D: return fsG_adaptive_avg_pool2d(x, m->kernel);
  case FSM_LEAKYRELU: return fsG_unary(FSU_LEAKY_RELU, x, m->p, 0);
  case FSM_UPSAMPLE: return fsM_upsample_forward(m, x);
  case FSM_MHA:
    fsT_seterr("MultiheadAttention takes (query, key, value) and returns (output, weights): call it directly, not as a layer of a model body");
    return NULL;
  case FSM_CONVTRANSPOSE2D:
    return fsG_conv_transpose2d(x, p[0], m->bias ? p[1] : NULL, m->stride, m->pad, m->output_pad, m->dil, m->groups);
  case FSM_MISH: return fsG_unary(FSU_MISH, x, 0, 0);
  case FSM_SOFTMAX: /* dim None: torch's _get_softmax_dim, 0 for 0-, 1- and 3-d input, else 1 */
    return fsG_softmax(x, m->bias ? (x->rank == 0 || x->rank == 1 || x->rank == 3 ? 0 : 1) : (int)m->in, false);
  case FSM_GROUPNORM:
    return fsG_group_norm(x, m->groups, m->nparams ? p[0] : NULL, m->nparams ? p[1] : NULL, m->p);
  case FSM_RMSNORM: return fsG_rms_norm(x, m->nnormalized, m->normalized, m->nparams ? p[0] : NULL, m->p);
  case FSM_CUSTOM: return m->custom->forward(m->custom, m, x);
  case FSM_IDENTITY: return fsT_retain(x);
  case FSM_MODULELIST:
  case FSM_MODULEDICT:
    fsT_seterr("Module [%s] is missing the required \"forward\" function", fsM_kind_name(m->kind));
    return NULL;
  default:
    fsT_seterr("%s has no forward", fsM_kind_name(m->kind));
    return NULL;
  }
}
