/* fsdp.c -- FSDP full shard (see fsdp.h). */
#include "fsdp.h"

#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "backend.h"

static int comm_err(void) {
  fsT_seterr("%s", fsT_error()[0] ? fsT_error() : "collective failed");
  return -1;
}

/* A tensor of t's shape whose data lies in base at element off (a view). */
static fs_tensor *view_at(fs_tensor *base, int64_t off, const fs_tensor *like) {
  fs_tensor *v = fsT_new(FS_F32, FS_DEV_META, like->rank, like->shape);
  if (!v) return NULL;
  v->device = base->device;
  v->data = fsT_f32(base) + off;
  v->base = fsT_retain(base);
  return v;
}

/* Points p into base at off (base NULL: back to no storage). */
static void point(fs_tensor *p, fs_tensor *base, int64_t off, fs_device dev) {
  fsT_release(p->base);
  p->base = base ? fsT_retain(base) : NULL;
  p->data = base ? fsT_f32(base) + off : NULL;
  p->device = base ? dev : FS_DEV_META;
}

static void release_unit(fsSH_unit *u) {
  for (int64_t i = 0; i < u->np; i++) {
    fs_tensor *p = u->ps[i].t;
    point(p, NULL, 0, FS_DEV_META);
    fsT_release(p->grad);
    p->grad = NULL;
  }
  fsT_release(u->full);
  fsT_release(u->gfull);
  u->full = u->gfull = NULL;
}

/* All-gathers u's flat parameter and points its parameters into it; with
 * grads, also a zeroed flat gradient their grads point into. */
static int gather(fsSH_model *s, fsSH_unit *u, bool grads) {
  int64_t padded = u->shard * s->world;
  if (!u->full) {
    if (!(u->full = fsT_new(FS_F32, s->dev, 1, &padded))) return -1;
    if (s->comm ? fsCC_all_gather(s->comm, u->flat->data, u->full->data, (size_t)u->shard, FS_F32) < 0
                : (fsB_get(s->dev)->copy(u->full->data, u->flat->data, (size_t)padded * 4), 0))
      return release_unit(u), comm_err();
    for (int64_t i = 0; i < u->np; i++) point(u->ps[i].t, u->full, u->off[i], s->dev);
  }
  if (grads && !u->gfull) {
    if (!(u->gfull = fsT_zeros(FS_F32, s->dev, 1, &padded))) return release_unit(u), -1;
    for (int64_t i = 0; i < u->np; i++) {
      fs_tensor *p = u->ps[i].t;
      fsT_release(p->grad);
      if (!(p->grad = view_at(u->gfull, u->off[i], p))) return release_unit(u), -1;
    }
  }
  return 0;
}

/* u's backward is over: reduce-scatter (mean) its gradient into the shard's
 * grad, release the gathered buffers. */
static int finish(fsSH_model *s, fsSH_unit *u) {
  int rc = 0;
  if (u->gfull) {
    float *mine = fsT_f32(u->gfull) + (int64_t)s->rank * u->shard;
    if (s->comm && fsCC_reduce_scatter(s->comm, u->gfull->data, mine, (size_t)u->shard, FS_F32, FSCC_MEAN) < 0)
      rc = comm_err();
    else if (!u->flat->grad && !(u->flat->grad = fsT_zeros_like(u->flat)))
      rc = -1;
    else
      fsB_get(s->dev)->axpy((size_t)u->shard, 1.0f, mine, fsT_f32(u->flat->grad));
  }
  release_unit(u);
  return rc;
}

static int hook(void *ud, int64_t k) {
  fsSH_model *s = ud;
  if (s->pending >= 0 && s->pending != k) {
    int p = s->pending;
    s->pending = -1;
    if (finish(s, &s->units[p]) < 0) return -1;
  }
  s->pending = (int)k;
  return gather(s, &s->units[k], true);
}

fs_tensor *fsSH_forward(fsSH_model *s, fs_tensor *x) {
  fs_tensor *cur = fsT_retain(x);
  for (int i = 0; cur && i < s->nsteps; i++) {
    int k = s->step_unit[i];
    fs_tensor *y = NULL;
    if (k < 0) {
      y = fsM_forward(s->steps[i], cur);
    } else if (gather(s, &s->units[k], false) == 0) {
      fs_tensor *out = fsM_forward(s->steps[i], cur);
      if (s->pending != k) release_unit(&s->units[k]); /* kept while its backward runs */
      y = out ? fsG_hook(out, hook, s, k) : NULL;
      fsT_release(out);
    }
    fsT_release(cur);
    cur = y;
  }
  return cur;
}

/* ---- a script class's root: its forward calls the units itself ---- */

/* The root's own parameters (units of FSM_PARAM holders) are used anywhere
 * in its forward: gathered with their gradients for the whole step. */
static bool root_param_unit(const fsSH_unit *u) { return u->m->kind == FSM_PARAM; }

int fsSH_begin(fsSH_model *s) {
  for (int k = 0; k < s->nunits; k++) {
    fsSH_unit *u = &s->units[k];
    if (!root_param_unit(u)) continue;
    release_unit(u); /* a forward without a backward since: its values are stale */
    if (gather(s, u, true) < 0) return -1;
  }
  return 0;
}

int fsSH_enter(fsSH_model *s, int k) { return gather(s, &s->units[k], false); }

fs_tensor *fsSH_leave(fsSH_model *s, int k, fs_tensor *out) {
  if (s->pending != k) release_unit(&s->units[k]); /* kept while its backward runs */
  return out ? fsG_hook(out, hook, s, k) : NULL;
}

int fsSH_backward_done(fsSH_model *s, bool ok) {
  int rc = 0;
  if (s->pending >= 0) rc = ok ? finish(s, &s->units[s->pending]) : (release_unit(&s->units[s->pending]), 0);
  s->pending = -1;
  for (int k = 0; k < s->nunits; k++) /* in unit order on every rank: the collectives pair up */
    if (root_param_unit(&s->units[k]) && s->units[k].gfull && ok && finish(s, &s->units[k]) < 0) rc = -1;
  for (int k = 0; k < s->nunits; k++) release_unit(&s->units[k]);
  return rc;
}

/* ---- wrapping ---- */

/* The forward steps: the root's children, a top-level repeat's copies one
 * by one; a root that is not a Sequential is one step.  A script class's
 * root (its forward calls its children itself): each child, each module of
 * a top-level ModuleList or ModuleDict, and each of its own parameters. */
static int each_step(fs_module *r, int (*fn)(fs_module *m, void *ud), void *ud) {
  if (r->kind == FSM_CUSTOM) {
    for (int i = 0; i < r->nkids; i++) {
      fs_module *k = r->kids[i];
      bool list = k->kind == FSM_MODULELIST || k->kind == FSM_MODULEDICT;
      for (int j = 0; j < (list ? k->nkids : 1); j++)
        if (fn(list ? k->kids[j] : k, ud) < 0) return -1;
    }
    return 0;
  }
  if (r->kind != FSM_SEQUENTIAL) return fn(r, ud);
  for (int i = 0; i < r->nkids; i++) {
    fs_module *k = r->kids[i];
    for (int j = 0; j < (k->kind == FSM_REPEAT ? k->nkids : 1); j++)
      if (fn(k->kind == FSM_REPEAT ? k->kids[j] : k, ud) < 0) return -1;
  }
  return 0;
}

typedef struct { int64_t *v; int n, cap; } sizes;

static int add_size(fs_module *m, void *ud) {
  sizes *z = ud;
  int64_t n = fsM_num_parameters(m);
  if (!n) return 0;
  if (z->n == z->cap) {
    int c = z->cap ? 2 * z->cap : 16;
    int64_t *v = realloc(z->v, (size_t)c * sizeof *v);
    if (!v) return -1;
    z->v = v;
    z->cap = c;
  }
  z->v[z->n++] = n;
  return 0;
}

int fsSH_unit_sizes(fs_module *root, int64_t **out) {
  sizes z = {0};
  if (each_step(root, add_size, &z) < 0) {
    free(z.v);
    fsT_seterr("out of memory");
    return -1;
  }
  *out = z.v;
  return z.n;
}

typedef struct { fsSH_model *s; int cap; } steps_ctx;

static int add_step(fs_module *m, void *ud) {
  steps_ctx *c = ud;
  fsSH_model *s = c->s;
  if (s->nsteps == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    fs_module **st = realloc(s->steps, (size_t)cap * sizeof *st);
    if (st) s->steps = st;
    int *su = st ? realloc(s->step_unit, (size_t)cap * sizeof *su) : NULL;
    if (!su) return -1;
    s->step_unit = su;
    c->cap = cap;
  }
  s->steps[s->nsteps] = m;
  s->step_unit[s->nsteps++] = fsM_num_parameters(m) ? s->nunits++ : -1;
  return 0;
}

static int plan_steps(fsSH_model *s) {
  steps_ctx c = {s, 0};
  return each_step(s->root, add_step, &c);
}

/* This rank's slice of parameter p (at element off of its unit's flat). */
static void slice_of(const fsSH_model *s, const fsSH_unit *u, int64_t off, int64_t numel,
                     int64_t *first, int64_t *count, int64_t *at) {
  int64_t lo = (int64_t)s->rank * u->shard, hi = lo + u->shard;
  int64_t a = off > lo ? off : lo, b = off + numel < hi ? off + numel : hi;
  *first = a - off;
  *count = b > a ? b - a : 0;
  *at = a - lo;
}

/* This rank's slice of u's parameter i from its reset_parameters rule. */
static int init_slice(const fsSH_model *s, fsSH_unit *u, int64_t i, uint64_t seed) {
  fsM_param *p = &u->ps[i];
  int64_t first, count, at;
  slice_of(s, u, u->off[i], p->t->numel, &first, &count, &at);
  return count ? fsM_init_param(p->owner, p->index, p->name, seed, s->dev, fsT_f32(u->flat) + at, (size_t)first,
                                (size_t)count)
               : 0;
}

int fsSH_reset_parameters(fsSH_model *s, uint64_t seed) {
  for (int k = 0; k < s->nunits; k++)
    for (int64_t i = 0; i < s->units[k].np; i++)
      if (init_slice(s, &s->units[k], i, seed) < 0) return -1;
  return 0;
}

static int shard_unit(fsSH_model *s, fsSH_unit *u, uint64_t seed) {
  if (!(u->off = malloc((size_t)(u->np ? u->np : 1) * sizeof *u->off))) {
    fsT_seterr("out of memory");
    return -1;
  }
  u->n = 0;
  for (int64_t i = 0; i < u->np; i++) {
    u->off[i] = u->n;
    u->n += u->ps[i].t->numel;
  }
  u->shard = (int64_t)fsCC_shard((size_t)u->n, s->world);
  if (!(u->flat = fsT_zeros(FS_F32, s->dev, 1, &u->shard))) return -1;
  u->flat->requires_grad = true;
  for (int64_t i = 0; i < u->np; i++) {
    fsM_param *p = &u->ps[i];
    int64_t first, count, at;
    slice_of(s, u, u->off[i], p->t->numel, &first, &count, &at);
    if (count && p->t->data) {
      if (fsB_transfer(s->dev, fsT_f32(u->flat) + at, p->t->device, fsT_f32(p->t) + first,
                       (size_t)count * 4) < 0)
        return -1;
    } else if (!p->t->data && init_slice(s, u, i, seed) < 0)
      return -1;
    if (p->t->data && !p->t->base) fsB_of(p->t)->free(p->t->data, fsT_nbytes(p->t));
    point(p->t, NULL, 0, FS_DEV_META);
  }
  return 0;
}

fsSH_model *fsSH_wrap(fs_module *root, fsCC_comm *comm, fs_device dev, uint64_t seed) {
  fsSH_model *s = calloc(1, sizeof *s);
  if (!s) {
    fsT_seterr("out of memory");
    return NULL;
  }
  s->root = fsM_retain(root);
  s->comm = comm;
  s->rank = comm ? comm->rank : 0;
  s->world = comm ? comm->world : 1;
  s->dev = dev;
  s->pending = -1;
  /* dropout keys as fsM_materialize sets them; meta parameters stay meta;
   * values a script made (its Parameters, its buffers) come to dev first */
  if (!fsB_get(dev) || fsM_to_device(root, dev) < 0 || fsM_materialize(root, FS_DEV_META, seed) < 0) goto fail;
  /* buffers (BatchNorm's running statistics) are not sharded: whole on every rank */
  if (fsM_materialize_buffers(root, dev) < 0) goto fail;
  if ((s->nall = fsM_parameters(root, &s->all)) < 0 || plan_steps(s) < 0) goto oom;
  if (!(s->units = calloc((size_t)(s->nunits ? s->nunits : 1), sizeof *s->units))) goto oom;
  int64_t cursor = 0;
  for (int i = 0; i < s->nsteps; i++) {
    if (s->step_unit[i] < 0) continue;
    fsSH_unit *u = &s->units[s->step_unit[i]];
    u->m = s->steps[i];
    fsM_param *mine;
    int64_t n = fsM_parameters(u->m, &mine);
    if (n < 0) goto oom;
    /* units cover s->all in order unless a parameter is tied across two */
    for (int64_t j = 0; j < n; j++)
      if (cursor + j >= s->nall || mine[j].t != s->all[cursor + j].t) {
        int64_t first = 0;
        while (first < s->nall && s->all[first].t != mine[j].t) first++;
        fsT_seterr("FSDP: parameter '%s' is also %s's '%s' (weight tying across wrapped units); tie parameters "
                   "within one top-level child, or use strategy=\"ddp\"", first < s->nall ? s->all[first].name : "?",
                   u->m->key ? u->m->key : "the root", mine[j].name);
        fsM_params_free(mine, n);
        goto fail;
      }
    fsM_params_free(mine, n);
    u->ps = s->all + cursor;
    u->np = n;
    cursor += n;
    if (shard_unit(s, u, seed) < 0) goto fail;
    if (root->kind == FSM_CUSTOM) { /* the evaluator brackets its calls with fsSH_enter/fsSH_leave */
      u->m->shard = s;
      u->m->shard_unit = s->step_unit[i];
    }
  }
  return s;
oom:
  fsT_seterr("out of memory");
fail:
  fsSH_free(s);
  return NULL;
}

void fsSH_free(fsSH_model *s) {
  if (!s) return;
  for (int k = 0; s->units && k < s->nunits; k++) {
    if (s->units[k].m && s->units[k].m->shard == s) s->units[k].m->shard = NULL;
    release_unit(&s->units[k]);
    fsT_release(s->units[k].flat);
    free(s->units[k].off);
  }
  free(s->units);
  if (s->nall > 0) fsM_params_free(s->all, s->nall);
  free(s->steps);
  free(s->step_unit);
  fsM_release(s->root);
  free(s);
}

/* ---- parameters one by one (checkpoints) ---- */

int fsSH_param_slice(const fsSH_model *s, int64_t i, int64_t *first, int64_t *count, int64_t *at) {
  int k = 0; /* the unit holding s->all[i]: units cover s->all in order */
  while (k + 1 < s->nunits && i >= s->units[k].ps - s->all + s->units[k].np) k++;
  const fsSH_unit *u = &s->units[k];
  int64_t j = i - (u->ps - s->all);
  slice_of(s, u, u->off[j], u->ps[j].t->numel, first, count, at);
  return k;
}
