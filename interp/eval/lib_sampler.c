/* lib_sampler.c -- torch.Generator, torch.utils.data's samplers and
 * random_split, over runtime/io/loader.h's generator and permutations.
 *
 * Invariant: every order drawn with a Generator is torch's for the same
 * seed (mt19937 seeded as torch seeds it, randperm and randint drawn as
 * torch's CPU kernels draw them). A sampler without a generator draws from a
 * generator seeded with the global seed (seed_everything) plus its pass
 * count (random_split: one element of the script's random stream), where
 * torch draws a seed from its global generator, whose state depends on
 * every earlier random call: those orders are reproducible but not torch's. The DataLoader (lib_data.c) asks fsE_sampler_list and
 * fsE_batch_list for one pass of whatever sampler it holds. */
#include <math.h>
#include <string.h>

#include "eval_int.h"
#include "rng.h"

/* ---- torch.Generator -------------------------------------------------------------------- */

/* torch's default_rng_seed_val: the seed of a Generator never seeded */
#define TORCH_DEFAULT_SEED 67280421310721ull

static void genv_free(void *p) { free(p); }
const fsV_class fsE_generator_class = {.name = "Generator", .free = genv_free};

NATIVE(s_generator) {
  if (s[0]->type == FSV_STR && strcmp(s[0]->u.str.s, "cpu") != 0) {
    fsV_seterr("Generator(): only device='cpu' generators are supported, not '%s'", s[0]->u.str.s);
    return NULL;
  }
  genv *g = calloc(1, sizeof *g);
  if (!g) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fsDL_mt_seed(&g->mt, TORCH_DEFAULT_SEED);
  return fsV_obj(&fsE_generator_class, g);
}

NATIVE(s_manual_seed) {
  fsDL_mt_seed(&((genv *)self->u.obj.data)->mt, (uint64_t)s[0]->u.i);
  return fsV_retain(self);
}

NATIVE(s_initial_seed) { return fsV_int((int64_t)((genv *)self->u.obj.data)->mt.seed); }

/* The generator a sampler without one draws pass `pass` from. */
static void fallback(fsE_ctx *E, uint64_t pass, fsDL_mt *g) { fsDL_mt_seed(g, E->seed + pass); }

static fsDL_mt *gen_of(const fs_value *v) {
  genv *g = v ? fsV_objdata(v, &fsE_generator_class) : NULL;
  return g ? &g->mt : NULL;
}

/* None or a Generator; else torch's TypeError. */
static int need_gen(const fs_value *v, const char *fn) {
  if (v->type == FSV_NONE || gen_of(v)) return 0;
  fsV_seterr("%s(): argument 'generator' must be torch.Generator, not %s", fn, fsV_type_name(v));
  return -1;
}

/* ---- samplers ---------------------------------------------------------------------------- */

typedef enum smp_kind { SMP_SEQUENTIAL, SMP_RANDOM, SMP_SUBSET_RANDOM, SMP_BATCH, SMP_DISTRIBUTED } smp_kind;

static const char *const smp_names[] = {"SequentialSampler", "RandomSampler", "SubsetRandomSampler",
                                        "BatchSampler", "DistributedSampler"};

typedef struct smpv {
  smp_kind kind;
  fs_value *source;      /* held: the data set, or BatchSampler's sampler */
  fs_value *gen;         /* held Generator, or NULL */
  size_t *indices, nind; /* SubsetRandomSampler */
  bool replacement;
  int64_t num_samples;   /* RandomSampler; -1: len(data_source) */
  int64_t batch_size;
  bool drop_last, shuffle;
  int rank, world;
  uint64_t seed, epoch, passes;
} smpv;

static void smpv_free(void *p) {
  smpv *v = p;
  fsV_release(v->source);
  fsV_release(v->gen);
  free(v->indices);
  free(v);
}

static int64_t smp_len(fsE_ctx *E, fs_value *self);
static fs_value *smp_iter(fsE_ctx *E, fs_value *self);
static char *smp_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<torch.utils.data.%s object>", smp_names[((smpv *)v->u.obj.data)->kind]);
  return fsV_buf_take(&b);
}
/* one vtable per kind, so type(s).__name__ and the sig rows are torch's names */
#define SMP_CLASS(n) {.name = n, .iter = smp_iter, .len = smp_len, .repr = smp_repr, .free = smpv_free}
static const fsV_class smp_classes[] = {
  SMP_CLASS("SequentialSampler"), SMP_CLASS("RandomSampler"), SMP_CLASS("SubsetRandomSampler"),
  SMP_CLASS("BatchSampler"), SMP_CLASS("DistributedSampler"),
};

static smpv *smp_of(const fs_value *v) {
  if (!v || v->type != FSV_OBJ) return NULL;
  for (size_t k = 0; k < sizeof smp_classes / sizeof *smp_classes; k++)
    if (v->u.obj.cls == &smp_classes[k]) return v->u.obj.data;
  return NULL;
}

bool fsE_is_sampler(const fs_value *v, int kind) {
  smpv *p = smp_of(v);
  return p && (kind < 0 || (int)p->kind == kind);
}

static fs_value *smp_new(smp_kind kind, fs_value *source, smpv **out) {
  smpv *p = calloc(1, sizeof *p);
  if (!p) {
    fsV_seterr("out of memory");
    return NULL;
  }
  p->kind = kind;
  p->source = source ? fsV_retain(source) : NULL;
  p->num_samples = -1;
  *out = p;
  return fsV_obj(&smp_classes[kind], p);
}

static int64_t pass_len(fsE_ctx *E, const smpv *p) {
  int64_t n;
  switch (p->kind) {
  case SMP_SEQUENTIAL: return fsV_len(E, p->source);
  case SMP_RANDOM: return p->num_samples >= 0 ? p->num_samples : fsV_len(E, p->source);
  case SMP_SUBSET_RANDOM: return (int64_t)p->nind;
  case SMP_BATCH:
    if ((n = fsV_len(E, p->source)) < 0) return -1;
    return p->drop_last ? n / p->batch_size : (n + p->batch_size - 1) / p->batch_size;
  case SMP_DISTRIBUTED:
    if ((n = fsV_len(E, p->source)) < 0) return -1;
    return p->drop_last && n % p->world ? n / p->world : (n + p->world - 1) / p->world;
  }
  return -1;
}

static int64_t smp_len(fsE_ctx *E, fs_value *self) { return pass_len(E, self->u.obj.data); }

/* One pass of a non-batch sampler of ours: *out (malloc'd), *m entries. */
static int smp_pass(fsE_ctx *E, smpv *p, size_t **out, size_t *m) {
  int64_t len = pass_len(E, p);
  int64_t n = p->kind == SMP_SUBSET_RANDOM ? (int64_t)p->nind : fsV_len(E, p->source);
  if (len < 0 || n < 0) return -1;
  size_t *r = malloc(((size_t)len + (size_t)n + 1) * sizeof *r), *perm = r + len;
  if (!r) {
    fsV_seterr("out of memory");
    return -1;
  }
  fsDL_mt own, *g = gen_of(p->gen);
  if (!g && p->kind != SMP_SEQUENTIAL && p->kind != SMP_DISTRIBUTED) fallback(E, p->passes, g = &own);
  p->passes++;
  switch (p->kind) {
  case SMP_SEQUENTIAL:
    for (int64_t i = 0; i < len; i++) r[i] = (size_t)i;
    break;
  case SMP_RANDOM:
    if (p->replacement) fsDL_randint(g, (uint64_t)n, (size_t)len, r);
    else { /* num_samples // n whole permutations, then a cut one (always drawn) */
      int64_t at = 0;
      for (; n && at + n <= len; at += n) fsDL_randperm(g, (size_t)n, r + at);
      fsDL_randperm(g, (size_t)n, perm);
      memcpy(r + at, perm, (size_t)(len - at) * sizeof *r);
    }
    break;
  case SMP_SUBSET_RANDOM:
    fsDL_randperm(g, p->nind, perm);
    for (size_t i = 0; i < p->nind; i++) r[i] = p->indices[perm[i]];
    break;
  case SMP_DISTRIBUTED: {
    fsDL_loader L;
    char *err = NULL;
    if (fsDL_init_order(&L, (size_t)n, 1, p->shuffle, false, p->seed, &err) != 0 ||
        fsDL_distribute(&L, p->rank, p->world, p->shuffle, p->seed, p->drop_last, &err) != 0) {
      fsDL_free(&L);
      free(r);
      fsE_err_own(err);
      return -1;
    }
    fsDL_start(&L, p->epoch);
    for (int64_t i = 0; i < len; i++) r[i] = fsDL_index(&L, (size_t)i);
    fsDL_free(&L);
    break;
  }
  case SMP_BATCH: break; /* not reached: batches go through fsE_batch_list */
  }
  *out = r;
  *m = (size_t)len;
  return 0;
}

/* An index a script's sampler gave: an int in [0, n). */
static int index_of(const fs_value *v, size_t n, size_t *out) {
  if (v->type != FSV_INT && v->type != FSV_BOOL) {
    fsV_seterr("DataLoader: a sampler must give integer indices, not %s", fsV_type_name(v));
    return -1;
  }
  int64_t i = fsE_ival(v);
  if (i < 0 || (uint64_t)i >= n) {
    fsV_seterr("DataLoader: the sampler gave index %lld, out of range for a data set of %zu items",
               (long long)i, n);
    return -1;
  }
  *out = (size_t)i;
  return 0;
}

/* Appends to a growing array. */
static int push(size_t **a, size_t *n, size_t *cap, size_t v) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 64, *p = realloc(*a, c * sizeof *p);
    if (!p) {
      fsV_seterr("out of memory");
      return -1;
    }
    *a = p;
    *cap = c;
  }
  (*a)[(*n)++] = v;
  return 0;
}

/* Iterates v, each item through one(E, item, ...): -1 stops. */
static int each(fsE_ctx *E, fs_value *v, int (*one)(fsE_ctx *, fs_value *, void *), void *ctx) {
  fsE_iter it;
  if (fsE_iter_begin(E, v, &it) < 0) return -1;
  fs_value *x;
  int rc;
  while ((rc = fsE_iter_next(E, &it, &x)) > 0) {
    rc = one(E, x, ctx);
    fsV_release(x);
    if (rc < 0) break;
  }
  fsE_iter_end(&it);
  return rc < 0 ? -1 : 0;
}

typedef struct collect { size_t n, *a, m, cap, *ends, nb, ecap; } collect;

static int collect_index(fsE_ctx *E, fs_value *x, void *ctx) {
  collect *c = ctx;
  size_t i;
  return index_of(x, c->n, &i) < 0 ? -1 : push(&c->a, &c->m, &c->cap, i);
}

int fsE_sampler_list(fsE_ctx *E, fs_value *v, size_t n, size_t **out, size_t *m) {
  smpv *p = smp_of(v);
  if (p && p->kind != SMP_BATCH) {
    if (smp_pass(E, p, out, m) < 0) return -1;
    for (size_t k = 0; k < *m; k++)
      if ((*out)[k] >= n) {
        fsV_seterr("DataLoader: the sampler gave index %zu, out of range for a data set of %zu items",
                   (*out)[k], n);
        free(*out);
        return -1;
      }
    return 0;
  }
  collect c = {.n = n};
  if (each(E, v, collect_index, &c) < 0) {
    free(c.a);
    return -1;
  }
  *out = c.a;
  *m = c.m;
  return 0;
}

static int collect_batch(fsE_ctx *E, fs_value *x, void *ctx) {
  collect *c = ctx;
  if (x->type != FSV_LIST && x->type != FSV_TUPLE) {
    fsV_seterr("DataLoader: a batch_sampler must give lists of indices, not %s", fsV_type_name(x));
    return -1;
  }
  for (size_t k = 0; k < x->u.seq.n; k++)
    if (collect_index(E, x->u.seq.items[k], c) < 0) return -1;
  return push(&c->ends, &c->nb, &c->ecap, c->m);
}

int fsE_batch_list(fsE_ctx *E, fs_value *v, size_t n, size_t **out, size_t *m, size_t **ends,
                   size_t *nb) {
  smpv *p = smp_of(v);
  collect c = {.n = n};
  if (p && p->kind == SMP_BATCH) { /* the inner sampler's pass cut into batches */
    if (fsE_sampler_list(E, p->source, n, &c.a, &c.m) < 0) return -1;
    size_t b = (size_t)p->batch_size;
    for (size_t at = b; at <= c.m; at += b)
      if (push(&c.ends, &c.nb, &c.ecap, at) < 0) goto fail;
    if (c.m % b && !p->drop_last && push(&c.ends, &c.nb, &c.ecap, c.m) < 0) goto fail;
    if (p->drop_last) c.m -= c.m % b;
  } else if (each(E, v, collect_batch, &c) < 0)
    goto fail;
  *out = c.a;
  *m = c.m;
  *ends = c.ends;
  *nb = c.nb;
  return 0;
fail:
  free(c.a);
  free(c.ends);
  return -1;
}

/* Iterating one of our samplers: its pass as ints, or as lists for BatchSampler. */
typedef struct smp_it { size_t *a, m, *ends, nb, at, batch; bool batches; } smp_it;
static void smp_it_free(void *p) {
  smp_it *it = p;
  free(it->a);
  free(it->ends);
  free(it);
}
static int smp_it_next(fsE_ctx *E, fs_value *self, fs_value **out) {
  smp_it *it = self->u.obj.data;
  if (!it->batches) {
    if (it->at >= it->m) return 0;
    return (*out = fsV_int((int64_t)it->a[it->at++])) ? 1 : -1;
  }
  if (it->batch >= it->nb) return 0;
  size_t end = it->ends[it->batch++];
  fs_value *l = fsV_list(end - it->at);
  for (; l && it->at < end; it->at++)
    if (fsV_list_append(l, fsV_int((int64_t)it->a[it->at])) < 0) {
      fsV_release(l);
      l = NULL;
    }
  return (*out = l) ? 1 : -1;
}
static const fsV_class smp_it_class = {.name = "sampler_iterator", .next = smp_it_next, .free = smp_it_free};

static fs_value *smp_iter(fsE_ctx *E, fs_value *self) {
  smpv *p = self->u.obj.data;
  smp_it *it = calloc(1, sizeof *it);
  if (!it) {
    fsV_seterr("out of memory");
    return NULL;
  }
  int rc = (it->batches = p->kind == SMP_BATCH)
               ? fsE_batch_list(E, self, SIZE_MAX, &it->a, &it->m, &it->ends, &it->nb)
               : fsE_sampler_list(E, self, SIZE_MAX, &it->a, &it->m);
  if (rc < 0) {
    free(it);
    return NULL;
  }
  return fsV_obj(&smp_it_class, it);
}

/* data_source: anything with a len() */
static int need_len(fsE_ctx *E, fs_value *v) { return fsV_len(E, v) < 0 ? -1 : 0; }

NATIVE(s_sequential) {
  smpv *p;
  return need_len(E, s[0]) < 0 ? NULL : smp_new(SMP_SEQUENTIAL, s[0], &p);
}

/* slots: data_source, replacement, num_samples, generator */
NATIVE(s_random) {
  if (need_len(E, s[0]) < 0 || need_gen(s[3], "RandomSampler") < 0) return NULL;
  if (s[2]->type != FSV_NONE && s[2]->u.i <= 0) {
    fsV_seterr("num_samples should be a positive integer value, but got num_samples=%lld", (long long)s[2]->u.i);
    return NULL;
  }
  smpv *p;
  fs_value *v = smp_new(SMP_RANDOM, s[0], &p);
  if (!v) return NULL;
  p->replacement = fsV_truthy(s[1]);
  p->num_samples = s[2]->type == FSV_NONE ? -1 : s[2]->u.i;
  p->gen = s[3]->type == FSV_NONE ? NULL : fsV_retain(s[3]);
  return v;
}

/* A sequence of ints >= 0 into a new array. */
static int int_list(const fs_value *v, const char *fn, size_t **out, size_t *n) {
  if (v->type != FSV_LIST && v->type != FSV_TUPLE && v->type != FSV_RANGE) {
    fsV_seterr("%s(): indices must be a sequence of integers, not %s", fn, fsV_type_name(v));
    return -1;
  }
  size_t m = v->type == FSV_RANGE ? (size_t)fsV_range_len(v) : v->u.seq.n;
  size_t *a = malloc((m ? m : 1) * sizeof *a);
  if (!a) {
    fsV_seterr("out of memory");
    return -1;
  }
  for (size_t k = 0; k < m; k++) {
    int64_t i = v->type == FSV_RANGE ? v->u.range.start + (int64_t)k * v->u.range.step
                                     : fsE_ival(v->u.seq.items[k]);
    if ((v->type != FSV_RANGE && v->u.seq.items[k]->type != FSV_INT) || i < 0) {
      fsV_seterr("%s(): indices must be integers >= 0", fn);
      free(a);
      return -1;
    }
    a[k] = (size_t)i;
  }
  *out = a;
  *n = m;
  return 0;
}

NATIVE(s_subset_random) {
  if (need_gen(s[1], "SubsetRandomSampler") < 0) return NULL;
  smpv *p;
  size_t *idx, n;
  if (int_list(s[0], "SubsetRandomSampler", &idx, &n) < 0) return NULL;
  fs_value *v = smp_new(SMP_SUBSET_RANDOM, NULL, &p);
  if (!v) {
    free(idx);
    return NULL;
  }
  p->indices = idx;
  p->nind = n;
  p->gen = s[1]->type == FSV_NONE ? NULL : fsV_retain(s[1]);
  return v;
}

/* slots: sampler, batch_size, drop_last */
NATIVE(s_batch) {
  if (s[1]->u.i <= 0) {
    fsV_seterr("batch_size should be a positive integer value, but got batch_size=%lld", (long long)s[1]->u.i);
    return NULL;
  }
  if (need_len(E, s[0]) < 0) return NULL;
  smpv *p;
  fs_value *v = smp_new(SMP_BATCH, s[0], &p);
  if (v) {
    p->batch_size = s[1]->u.i;
    p->drop_last = fsV_truthy(s[2]);
  }
  return v;
}

/* slots: dataset, num_replicas, rank, shuffle, seed, drop_last */
NATIVE(s_distributed) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  int64_t world = s[1]->type == FSV_NONE ? (fv ? fv->env.world_size : 1) : s[1]->u.i;
  int64_t rank = s[2]->type == FSV_NONE ? fsE_current_rank(E) : s[2]->u.i;
  if (world < 1) {
    fsV_seterr("DistributedSampler(): num_replicas must be a positive integer, not %lld", (long long)world);
    return NULL;
  }
  if (rank < 0 || rank >= world) {
    fsV_seterr("Invalid rank %lld, rank should be in the interval [0, %lld]", (long long)rank, (long long)world - 1);
    return NULL;
  }
  if (need_len(E, s[0]) < 0) return NULL;
  smpv *p;
  fs_value *v = smp_new(SMP_DISTRIBUTED, s[0], &p);
  if (v) {
    p->world = (int)world;
    p->rank = (int)rank;
    p->shuffle = fsV_truthy(s[3]);
    p->seed = (uint64_t)s[4]->u.i;
    p->drop_last = fsV_truthy(s[5]);
  }
  return v;
}

bool fsE_batch_sampler_parts(const fs_value *v, fs_value **sampler, int64_t *batch_size, bool *drop_last) {
  smpv *p = smp_of(v);
  if (!p || p->kind != SMP_BATCH) return false;
  *sampler = p->source;
  *batch_size = p->batch_size;
  *drop_last = p->drop_last;
  return true;
}

NATIVE(s_set_epoch) {
  ((smpv *)self->u.obj.data)->epoch = (uint64_t)s[0]->u.i;
  return fsV_none();
}

/* ---- random_split ------------------------------------------------------------------------ */

/* slots: dataset, lengths, generator */
NATIVE(s_random_split) {
  if (need_gen(s[2], "random_split") < 0) return NULL;
  int64_t n = fsV_len(E, s[0]);
  if (n < 0) return NULL;
  fs_value *ls = s[1];
  size_t k = ls->u.seq.n;
  int64_t *len = calloc(k + 1, sizeof *len), total = 0;
  double fsum = 0;
  bool fractions = false;
  if (!len) return fsE_err_own(NULL);
  for (size_t i = 0; i < k; i++) {
    if (!fsV_is_number(ls->u.seq.items[i])) {
      free(len);
      fsV_seterr("random_split(): lengths must be numbers, not %s", fsV_type_name(ls->u.seq.items[i]));
      return NULL;
    }
    fsum += ls->u.seq.items[i]->type == FSV_FLOAT ? ls->u.seq.items[i]->u.f : (double)fsE_ival(ls->u.seq.items[i]);
  }
  /* torch: math.isclose(sum(lengths), 1) and sum(lengths) <= 1 -> fractions */
  fractions = fabs(fsum - 1.0) <= 1e-9 && fsum <= 1.0;
  for (size_t i = 0; i < k; i++) {
    fs_value *x = ls->u.seq.items[i];
    double f = x->type == FSV_FLOAT ? x->u.f : (double)fsE_ival(x);
    if (fractions) {
      if (f < 0 || f > 1) {
        free(len);
        fsV_seterr("Fraction at index %zu is not between 0 and 1", i);
        return NULL;
      }
      len[i] = (int64_t)floor((double)n * f);
    } else if (x->type == FSV_FLOAT) {
      free(len);
      fsV_seterr("random_split(): lengths must be integers or fractions summing to 1, not %g", f);
      return NULL;
    } else
      len[i] = (int64_t)f;
    total += len[i];
  }
  for (int64_t r = 0; fractions && r < n - total; r++) len[(size_t)r % k]++;
  if (fractions) total = n;
  for (size_t i = 0; i < k; i++)
    if (len[i] < 0) total = -1;
  if (total != n) {
    free(len);
    fsV_seterr("Sum of input lengths does not equal the length of the input dataset!");
    return NULL;
  }
  size_t *perm = malloc(((size_t)n + 1) * sizeof *perm);
  fs_value *out = perm ? fsV_list(k) : NULL;
  if (out) {
    fsDL_mt own, *g = gen_of(s[2]);
    /* torch draws from its global generator: here one element of the script's stream
     * seeds the split, so successive splits differ and a rerun repeats them */
    if (!g) fsDL_mt_seed(g = &own, fsR_bits(E->seed, fsE_draw(E, 1)));
    fsDL_randperm(g, (size_t)n, perm);
  }
  for (size_t i = 0, at = 0; out && i < k; at += (size_t)len[i++]) {
    fs_value *idx = fsV_list((size_t)len[i]);
    for (int64_t j = 0; idx && j < len[i]; j++)
      if (fsV_list_append(idx, fsV_int((int64_t)perm[at + (size_t)j])) < 0) {
        fsV_release(idx);
        idx = NULL;
      }
    fs_value *sub = idx ? fsE_subset(E, s[0], idx) : NULL;
    fsV_release(idx);
    if (!sub || fsV_list_append(out, sub) < 0) {
      fsV_release(out);
      out = NULL;
    }
  }
  free(perm);
  free(len);
  return out ? out : (fsV_error()[0] ? NULL : fsE_err_own(NULL));
}

static const fsE_reg sampler_funcs[] = {
  {"Generator", s_generator}, {"Generator.manual_seed", s_manual_seed},
  {"Generator.initial_seed", s_initial_seed},
  {"SequentialSampler", s_sequential}, {"RandomSampler", s_random},
  {"SubsetRandomSampler", s_subset_random}, {"BatchSampler", s_batch},
  {"DistributedSampler", s_distributed}, {"DistributedSampler.set_epoch", s_set_epoch},
  {"random_split", s_random_split},
  {NULL, NULL},
};
const fsE_lib fsE_lib_sampler = {"sampler", sampler_funcs};
