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

static void release_unit(fsSH_model *s, fsSH_unit *u) {
  int64_t padded = u->shard * s->world;
  s->gathered -= ((u->full != NULL) + (u->gfull != NULL)) * padded * 4;
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

/* A gathered buffer of padded elements was made: the peak accounting. */
static void count_gathered(fsSH_model *s, int64_t padded) {
  s->gathered += padded * 4;
  if (s->gathered > s->gathered_peak) s->gathered_peak = s->gathered;
}

/* All-gathers u's flat parameter and points its parameters into it; with
 * grads, also a zeroed flat gradient their grads point into. */
static int gather(fsSH_model *s, fsSH_unit *u, bool grads) {
  int64_t padded = u->shard * s->world;
  if (!u->full) {
    if (!(u->full = fsT_new(FS_F32, s->dev, 1, &padded))) return -1;
    count_gathered(s, padded);
    if (s->comm ? fsCC_all_gather(s->comm, u->flat->data, u->full->data, (size_t)u->shard, FS_F32) < 0
                : (fsB_get(s->dev)->copy(u->full->data, u->flat->data, (size_t)padded * 4), 0))
      return release_unit(s, u), comm_err();
    for (int64_t i = 0; i < u->np; i++) point(u->ps[i].t, u->full, u->off[i], s->dev);
  }
  if (grads && !u->gfull) {
    if (!(u->gfull = fsT_zeros(FS_F32, s->dev, 1, &padded))) return release_unit(s, u), -1;
    count_gathered(s, padded);
    for (int64_t i = 0; i < u->np; i++) {
      fs_tensor *p = u->ps[i].t;
      fsT_release(p->grad);
      if (!(p->grad = view_at(u->gfull, u->off[i], p))) return release_unit(s, u), -1;
    }
  }
  return 0;
}

/* torch's FSDP gradient_predivide_factor: the power of two that the
 * gradients are divided by before the sum (world / it after), so that a
 * float16 sum neither overflows nor underflows. */
static int predivide_factor(int world) {
  int f = 1;
  while (world % f == 0 && world / f > f) f *= 2;
  return f;
}

/* x[0..n) (on dev) rounded to dt, divided by div and rounded again, as
 * torch's grad.div_(div) in dt. */
static int round_div(fs_device dev, fs_dtype dt, float *x, size_t n, float div) {
  const fsB_backend *b = fsB_get(dev);
  float *h = dev == FS_DEV_CPU ? x : malloc(n * sizeof *h);
  if (!h) {
    fsT_seterr("out of memory");
    return -1;
  }
  int rc = h == x ? 0 : b->to_host(h, x, n * sizeof *h);
  if (rc == 0) {
    fsT_round_array(dt, h, n);
    if (div != 1.0f) {
      for (size_t i = 0; i < n; i++) h[i] /= div;
      fsT_round_array(dt, h, n);
    }
    if (h != x) rc = b->from_host(x, h, n * sizeof *h);
  }
  if (h != x) free(h);
  return rc < 0 ? -1 : 0;
}

/* Reduce-scatters (mean) u's gathered gradient into its block mine (in
 * place), in s->reduce_dtype. */
static int reduce_grad(fsSH_model *s, fsSH_unit *u, float *mine) {
  size_t count = (size_t)u->shard;
  if (s->reduce_dtype == FS_F32)
    return s->comm && fsCC_reduce_scatter(s->comm, u->gfull->data, mine, count, FS_F32, FSCC_MEAN) < 0 ? comm_err() : 0;
  /* float16 values held in float32, summed in float32 and rounded once: for
   * two ranks NCCL's float16 sum (but for a rare double rounding), for more
   * NCCL rounds after each hop of its ring */
  int pre = predivide_factor(s->world);
  if (round_div(s->dev, s->reduce_dtype, fsT_f32(u->gfull), count * (size_t)s->world, (float)pre) < 0) return -1;
  if (s->comm && fsCC_reduce_scatter(s->comm, u->gfull->data, mine, count, FS_F32, FSCC_SUM) < 0) return comm_err();
  return round_div(s->dev, s->reduce_dtype, mine, count, (float)s->world / (float)pre); /* 1.5 for 3 ranks */
}

/* u's backward is over: reduce-scatter (mean) its gradient into the shard's
 * grad, release the gathered buffers. */
static int finish(fsSH_model *s, fsSH_unit *u) {
  int rc = 0;
  if (u->gfull) {
    float *mine = fsT_f32(u->gfull) + (int64_t)s->rank * u->shard;
    if (reduce_grad(s, u, mine) < 0)
      rc = -1;
    else if (!u->flat->grad && !(u->flat->grad = fsT_zeros_like(u->flat)))
      rc = -1;
    else
      fsB_get(s->dev)->axpy((size_t)u->shard, 1.0f, mine, fsT_f32(u->flat->grad));
  }
  release_unit(s, u);
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
      if (s->pending != k) release_unit(s, &s->units[k]); /* kept while its backward runs */
      y = out ? fsG_hook(out, hook, s, k) : NULL;
      fsT_release(out);
    }
    fsT_release(cur);
    cur = y;
  }
  return cur;
}

/* ---- a script class's root: its forward calls the units itself ---- */

int fsSH_begin(fsSH_model *s) {
  for (int k = 0; k < s->nunits; k++) {
    fsSH_unit *u = &s->units[k];
    if (!u->held) continue;
    release_unit(s, u); /* a forward without a backward since: its values are stale */
    if (gather(s, u, true) < 0) return -1;
  }
  return 0;
}

int fsSH_enter(fsSH_model *s, int k) { return gather(s, &s->units[k], false); }

fs_tensor *fsSH_leave(fsSH_model *s, int k, fs_tensor *out) {
  if (s->pending != k) release_unit(s, &s->units[k]); /* kept while its backward runs */
  return out ? fsG_hook(out, hook, s, k) : NULL;
}

int fsSH_backward_done(fsSH_model *s, bool ok) {
  int rc = 0;
  if (s->pending >= 0) rc = ok ? finish(s, &s->units[s->pending]) : (release_unit(s, &s->units[s->pending]), 0);
  s->pending = -1;
  for (int k = 0; k < s->nunits; k++) /* in unit order on every rank: the collectives pair up */
    if (s->units[k].held && s->units[k].gfull && ok && finish(s, &s->units[k]) < 0) rc = -1;
  for (int k = 0; k < s->nunits; k++) release_unit(s, &s->units[k]);
  return rc;
}

/* ---- wrapping: which units (one choice for fsSH_wrap and `plan`) ---- */

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

typedef struct { fs_module **v; int n, cap; } mods;

static int push_mod(fs_module *m, void *ud) {
  mods *z = ud;
  if (z->n == z->cap) {
    int c = z->cap ? 2 * z->cap : 16;
    fs_module **v = realloc(z->v, (size_t)c * sizeof *v);
    if (!v) {
      fsT_seterr("out of memory");
      return -1;
    }
    z->v = v;
    z->cap = c;
  }
  z->v[z->n++] = m;
  return 0;
}

static bool holds(const mods *z, const fs_module *m) {
  for (int i = 0; i < z->n; i++)
    if (z->v[i] == m) return true;
  return false;
}

/* torch's _recursive_wrap: the modules the policy wraps at or below m (all
 * of them, nested ones too) go to *wrapped; *numel gets the elements the
 * units at or below m hold.  The root (top) is never a unit of its own. */
static int recursive_wrap(fs_module *m, bool top, const fsSH_policy *pol, mods *wrapped, int64_t *numel) {
  int64_t total = fsM_num_parameters(m), inside = 0;
  *numel = 0;
  int w = pol->wraps(m, true, total, pol->ud);
  if (w <= 0) return w;
  for (int i = 0; i < m->nkids; i++) {
    int64_t n;
    if (m->kids[i]->kind == FSM_PARAM || m->kids[i]->kind == FSM_BUFFER) continue; /* not modules to torch */
    if (recursive_wrap(m->kids[i], false, pol, wrapped, &n) < 0) return -1;
    inside += n;
  }
  if (!top && (w = pol->wraps(m, false, total - inside, pol->ud)) != 0) {
    if (w < 0 || push_mod(m, wrapped) < 0) return -1;
    *numel = total;
    return 0;
  }
  *numel = inside;
  return 0;
}

/* The outermost wrapped modules below m, in state-dict order. */
static int outermost(fs_module *m, const mods *wrapped, mods *z) {
  for (int i = 0; i < m->nkids; i++)
    if (holds(wrapped, m->kids[i]) ? push_mod(m->kids[i], z) < 0 : outermost(m->kids[i], wrapped, z) < 0) return -1;
  return 0;
}

/* The units an auto_wrap_policy makes below the root. */
static int named_units(fs_module *root, const fsSH_policy *pol, mods *z) {
  mods wrapped = {0};
  int64_t n;
  int rc = recursive_wrap(root, true, pol, &wrapped, &n) < 0 || outermost(root, &wrapped, z) < 0 ? -1 : 0;
  free(wrapped.v);
  return rc;
}

/* all[i] is t: its index, or -1. */
static int64_t param_index(const fsM_param *all, int64_t n, const fs_tensor *t) {
  for (int64_t i = 0; i < n; i++)
    if (all[i].t == t) return i;
  return -1;
}

enum { UNCLAIMED = -1, TIED = -2, HOLDS_SOME = -3 };

/* The parameters of m's modules outside every candidate (the root's unit's
 * share): one a candidate holds too (`head.weight = wte.weight` with wte a
 * unit) is tied across units. */
static void claim_rest(fs_module *m, const mods *cand, const fsSH_layout *L, int *claim) {
  for (int j = 0; j < m->nparams; j++) {
    int64_t i = param_index(L->all, L->nall, m->params[j]);
    if (i >= 0 && claim[i] >= 0) claim[i] = TIED;
  }
  for (int k = 0; k < m->nkids; k++)
    if (!holds(cand, m->kids[k])) claim_rest(m->kids[k], cand, L, claim);
}

int fsSH_layout_of(fs_module *root, const fsSH_policy *pol, fsSH_layout *L) {
  memset(L, 0, sizeof *L);
  mods cand = {0};
  bool custom = root->kind == FSM_CUSTOM;
  int *claim = NULL, *unit_of_cand = NULL; /* claim[i]: the candidate all[i] goes to, or UNCLAIMED / TIED */
  if ((L->nall = fsM_parameters(root, &L->all)) < 0) goto oom;
  if (custom && pol ? named_units(root, pol, &cand) < 0 : each_step(root, push_mod, &cand) < 0) goto fail;
  if (!(claim = malloc((size_t)(L->nall ? L->nall : 1) * sizeof *claim)) ||
      !(L->unit = malloc((size_t)(L->nall ? L->nall : 1) * sizeof *L->unit)) ||
      !(unit_of_cand = calloc((size_t)(cand.n ? cand.n : 1), sizeof *unit_of_cand)) ||
      !(L->m = calloc((size_t)cand.n + 1, sizeof *L->m)) || !(L->held = calloc((size_t)cand.n + 1, sizeof *L->held)) ||
      !(L->numel = calloc((size_t)cand.n + 1, sizeof *L->numel)))
    goto oom;
  for (int64_t i = 0; i < L->nall; i++) claim[i] = UNCLAIMED;
  /* each parameter goes to the one candidate holding it; one that two hold
   * (tied across units) goes to the root's unit, gathered for the whole
   * step, as a script class's parameters outside every candidate do */
  for (int c = 0; c < cand.n; c++) {
    fsM_param *mine;
    int64_t n = fsM_parameters(cand.v[c], &mine);
    if (n < 0) goto oom;
    for (int64_t j = 0; j < n; j++) {
      int64_t i = param_index(L->all, L->nall, mine[j].t);
      if (i < 0) continue;
      if (claim[i] != UNCLAIMED && claim[i] != c && !custom) {
        fsT_seterr("FSDP: parameter '%s' is also %s's '%s' (weight tying across wrapped units); tie parameters "
                   "within one top-level child, or use strategy=\"ddp\"", L->all[i].name,
                   cand.v[c]->key ? cand.v[c]->key : "the root", mine[j].name);
        fsM_params_free(mine, n);
        goto fail;
      }
      claim[i] = claim[i] == UNCLAIMED || claim[i] == c ? c : TIED;
    }
    fsM_params_free(mine, n);
  }
  if (custom) claim_rest(root, &cand, L, claim);
  /* units: the candidates left with parameters, in order, then the root's */
  for (int c = 0; c < cand.n; c++) unit_of_cand[c] = UNCLAIMED;
  for (int64_t i = 0; i < L->nall; i++)
    if (claim[i] >= 0) unit_of_cand[claim[i]] = HOLDS_SOME;
  for (int c = 0; c < cand.n; c++)
    if (unit_of_cand[c] == HOLDS_SOME) {
      unit_of_cand[c] = L->n;
      L->held[L->n] = custom && cand.v[c]->kind == FSM_PARAM; /* a root's own Parameter: used anywhere in its forward */
      L->m[L->n++] = cand.v[c];
    }
  int root_unit = -1;
  for (int64_t i = 0; i < L->nall; i++) {
    if (claim[i] < 0 && root_unit < 0) {
      root_unit = L->n;
      L->held[L->n] = true;
      L->m[L->n++] = root;
    }
    L->unit[i] = claim[i] >= 0 ? unit_of_cand[claim[i]] : root_unit;
    L->numel[L->unit[i]] += L->all[i].t->numel;
  }
  free(claim);
  free(unit_of_cand);
  free(cand.v);
  return 0;
oom:
  fsT_seterr("out of memory");
fail:
  free(claim);
  free(unit_of_cand);
  free(cand.v);
  fsSH_layout_free(L);
  return -1;
}

void fsSH_layout_free(fsSH_layout *L) {
  if (L->nall > 0) fsM_params_free(L->all, L->nall);
  free(L->unit);
  free(L->m);
  free(L->held);
  free(L->numel);
  memset(L, 0, sizeof *L);
}

int64_t fsSH_layout_gathered(const fsSH_layout *L, int world) {
  int64_t held = 0, largest = 0;
  for (int k = 0; k < L->n; k++) {
    int64_t padded = (int64_t)fsCC_shard((size_t)L->numel[k], world) * world;
    if (L->held[k]) held += padded;
    else if (padded > largest) largest = padded;
  }
  return held + largest;
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

/* Unit k of the layout: its parameters (in state-dict order) and shard. */
static int build_unit(fsSH_model *s, int k, uint64_t seed) {
  fsSH_unit *u = &s->units[k];
  u->m = s->layout.m[k];
  u->held = s->layout.held[k];
  int64_t n = 0;
  for (int64_t i = 0; i < s->nall; i++) n += s->layout.unit[i] == k;
  if (!(u->ps = malloc((size_t)(n ? n : 1) * sizeof *u->ps))) {
    fsT_seterr("out of memory");
    return -1;
  }
  for (int64_t i = 0; i < s->nall; i++)
    if (s->layout.unit[i] == k) {
      s->pos[i] = u->np;
      u->ps[u->np++] = s->all[i]; /* names stay the layout's */
    }
  if (shard_unit(s, u, seed) < 0) return -1;
  if (s->root->kind == FSM_CUSTOM && !u->held) { /* the evaluator brackets its calls with fsSH_enter/fsSH_leave */
    u->m->shard = s;
    u->m->shard_unit = k;
  }
  return 0;
}

fsSH_model *fsSH_wrap(fs_module *root, const fsSH_policy *policy, fsCC_comm *comm, fs_device dev, uint64_t seed) {
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
  if (fsSH_layout_of(root, policy, &s->layout) < 0) goto fail;
  s->all = s->layout.all;
  s->nall = s->layout.nall;
  s->nunits = s->layout.n;
  mods steps = {0};
  if (root->kind != FSM_CUSTOM && each_step(root, push_mod, &steps) < 0) goto oom;
  s->steps = steps.v;
  s->nsteps = steps.n;
  if (!(s->step_unit = malloc((size_t)(s->nsteps ? s->nsteps : 1) * sizeof *s->step_unit))) goto oom;
  for (int i = 0, k = 0; i < s->nsteps; i++) /* a declared model's units are its steps with parameters */
    s->step_unit[i] = fsM_num_parameters(s->steps[i]) ? k++ : -1;
  if (!(s->units = calloc((size_t)(s->nunits ? s->nunits : 1), sizeof *s->units)) ||
      !(s->pos = malloc((size_t)(s->nall ? s->nall : 1) * sizeof *s->pos)))
    goto oom;
  for (int k = 0; k < s->nunits; k++)
    if (build_unit(s, k, seed) < 0) goto fail;
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
    release_unit(s, &s->units[k]);
    fsT_release(s->units[k].flat);
    free(s->units[k].off);
    free(s->units[k].ps);
  }
  free(s->units);
  free(s->pos);
  fsSH_layout_free(&s->layout);
  free(s->steps);
  free(s->step_unit);
  fsM_release(s->root);
  free(s);
}

/* ---- parameters one by one (checkpoints) ---- */

int fsSH_param_slice(const fsSH_model *s, int64_t i, int64_t *first, int64_t *count, int64_t *at) {
  int k = s->layout.unit[i];
  const fsSH_unit *u = &s->units[k];
  int64_t j = s->pos[i];
  slice_of(s, u, u->off[j], u->ps[j].t->numel, first, count, at);
  return k;
}
