/* loader.c -- epoch order (torch's generator and samplers), rank slicing,
 * batch stacking, and the worker threads that stack batches ahead. */
#define _POSIX_C_SOURCE 200809L
#include "loader.h"

#include <pthread.h>
#include <sys/types.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "dataio.h"
#include "rng.h"

/* ---- torch.Generator (mt19937) and randperm ------------------------------------------- */

void fsDL_mt_seed(fsDL_mt *g, uint64_t seed) {
  g->seed = seed;
  g->state[0] = (uint32_t)seed; /* torch keeps the low 32 bits */
  for (int i = 1; i < 624; i++)
    g->state[i] = 1812433253u * (g->state[i - 1] ^ (g->state[i - 1] >> 30)) + (uint32_t)i;
  g->next = 624;
}

uint32_t fsDL_mt_u32(fsDL_mt *g) {
  if (g->next >= 624) {
    for (int k = 0; k < 624; k++) {
      uint32_t y = (g->state[k] & 0x80000000u) | (g->state[(k + 1) % 624] & 0x7fffffffu);
      g->state[k] = g->state[(k + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
    }
    g->next = 0;
  }
  uint32_t y = g->state[g->next++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* torch's random64(): two draws, the first the high half. */
uint64_t fsDL_mt_u64(fsDL_mt *g) {
  uint64_t hi = fsDL_mt_u32(g);
  return hi << 32 | fsDL_mt_u32(g);
}

void fsDL_randperm(fsDL_mt *g, size_t n, size_t *out) {
  for (size_t i = 0; i < n; i++) out[i] = i;
  for (size_t i = 0; i + 1 < n; i++) {
    size_t z = (size_t)(fsDL_mt_u32(g) % (uint64_t)(n - i)), t = out[i];
    out[i] = out[i + z];
    out[i + z] = t;
  }
}

/* random_from_to: 64-bit draws only for ranges of 2^32 and more */
void fsDL_randint(fsDL_mt *g, uint64_t high, size_t n, size_t *out) {
  for (size_t i = 0; i < n; i++)
    out[i] = (size_t)((high >= (1ull << 32) ? fsDL_mt_u64(g) : fsDL_mt_u32(g)) % high);
}

/* ---- worker threads ------------------------------------------------------------------ */

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };

typedef struct slot {
  fsDL_batch x, y;
  size_t batch;
  int state;
  char *err;
} slot;

typedef struct fsDL_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t *threads;
  int nthreads;
  slot *slots;
  size_t nslots;
  size_t claim;    /* the next batch a worker takes */
  size_t released; /* batches below this one the consumer is done with */
  size_t nbatches; /* of this epoch; 0 while an epoch is being set up */
  int inflight;
  bool stop;
  pid_t pid; /* the process whose threads these are: a forked child has none of them */
} fsDL_pool;

static int batch_init(fsDL_batch *b, const fsS_layout *l, size_t items) {
  b->dtype = l->dtype;
  b->ndim = l->ndim + 1;
  b->shape[0] = 0;
  memcpy(b->shape + 1, l->shape, sizeof(int64_t) * (size_t)l->ndim);
  if (l->bytes && items > SIZE_MAX / l->bytes) return -1;
  size_t bytes = l->bytes * items;
  b->data = malloc(bytes ? bytes : 1);
  return b->data ? 0 : -1;
}

/* Positions of batch k of this epoch. */
static void batch_range(const fsDL_loader *L, size_t k, size_t *first, size_t *count) {
  if (L->bounds) {
    *first = k ? L->bounds[k - 1] : 0;
    *count = L->bounds[k] - *first;
    return;
  }
  *first = k * L->batch_size;
  size_t left = L->num_samples - *first;
  *count = left < L->batch_size ? left : L->batch_size;
}

/* The largest batch this loader makes (its buffers' capacity). */
static size_t batch_cap(const fsDL_loader *L) {
  size_t cap = L->batch_size < L->n ? L->batch_size : L->n;
  for (size_t k = 0; L->bounds && k < L->nbounds; k++) {
    size_t c = L->bounds[k] - (k ? L->bounds[k - 1] : 0);
    if (c > cap) cap = c;
  }
  return cap;
}

static int fill(const fsDL_loader *L, fsDL_batch *x, fsDL_batch *y, size_t first, size_t count,
                char **err) {
  size_t xb = L->ds->x.bytes, yb = L->ds->y.bytes;
  for (size_t k = 0; k < count; k++)
    if (fsS_get(L->ds, fsDL_index(L, first + k), fsDL_key(L, first + k), (char *)x->data + k * xb,
                (char *)y->data + k * yb, err) != 0)
      return -1;
  x->shape[0] = y->shape[0] = (int64_t)count;
  return 0;
}

static void *worker(void *arg) {
  fsDL_loader *L = arg;
  fsDL_pool *P = L->pool;
  pthread_mutex_lock(&P->mu);
  for (;;) {
    while (!P->stop && !(P->claim < P->nbatches && P->claim < P->released + P->nslots))
      pthread_cond_wait(&P->cv, &P->mu);
    if (P->stop) break;
    size_t k = P->claim++;
    slot *s = &P->slots[k % P->nslots];
    s->state = SLOT_FILLING;
    P->inflight++;
    pthread_mutex_unlock(&P->mu);
    size_t first, count;
    char *err = NULL;
    batch_range(L, k, &first, &count);
    if (fill(L, &s->x, &s->y, first, count, &err) != 0 && !err) err = fsIO_errf("out of memory");
    pthread_mutex_lock(&P->mu);
    s->batch = k;
    s->err = err;
    s->state = SLOT_READY;
    P->inflight--;
    pthread_cond_broadcast(&P->cv);
  }
  pthread_mutex_unlock(&P->mu);
  return NULL;
}

static void pool_release(fsDL_pool *P) {
  for (size_t i = 0; P->slots && i < P->nslots; i++) {
    free(P->slots[i].x.data);
    free(P->slots[i].y.data);
    free(P->slots[i].err);
  }
  free(P->threads);
  free(P->slots);
  free(P);
}

static void pool_free(fsDL_pool *P) {
  if (!P) return;
  pthread_mutex_lock(&P->mu);
  P->stop = true;
  pthread_cond_broadcast(&P->cv);
  pthread_mutex_unlock(&P->mu);
  for (int i = 0; i < P->nthreads; i++) pthread_join(P->threads[i], NULL);
  pthread_cond_destroy(&P->cv);
  pthread_mutex_destroy(&P->mu);
  pool_release(P);
}

/* L's pool if its threads are this process's. After a fork (fabric.launch()
 * forks the ranks) the child has none of them and the lock may be held by
 * a thread that no longer exists: the pool's memory is released without
 * touching the lock, and fsDL_start makes a new one. */
static fsDL_pool *own_pool(fsDL_loader *L) {
  if (L->pool && L->pool->pid != getpid()) {
    pool_release(L->pool);
    L->pool = NULL;
  }
  return L->pool;
}

/* Stops claims and waits for batches in flight: the epoch's order may change. */
static void pool_quiesce(fsDL_pool *P) {
  pthread_mutex_lock(&P->mu);
  P->nbatches = 0;
  while (P->inflight) pthread_cond_wait(&P->cv, &P->mu);
  for (size_t i = 0; i < P->nslots; i++) {
    free(P->slots[i].err);
    P->slots[i].err = NULL;
    P->slots[i].state = SLOT_FREE;
  }
  P->claim = P->released = 0;
  pthread_mutex_unlock(&P->mu);
}

static void pool_go(fsDL_loader *L) {
  pthread_mutex_lock(&L->pool->mu);
  L->pool->nbatches = fsDL_len(L);
  pthread_cond_broadcast(&L->pool->cv);
  pthread_mutex_unlock(&L->pool->mu);
}

/* Starts L->nworkers threads; false (no pool: batches made on demand) when they cannot start. */
static bool pool_start(fsDL_loader *L) {
  fsDL_pool *P = calloc(1, sizeof *P);
  if (!P) return false;
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv, NULL);
  P->pid = getpid();
  P->nslots = (size_t)L->nworkers * (size_t)L->prefetch;
  P->slots = calloc(P->nslots, sizeof *P->slots);
  P->threads = calloc((size_t)L->nworkers, sizeof *P->threads);
  size_t cap = batch_cap(L);
  bool ok = P->slots && P->threads;
  for (size_t i = 0; ok && i < P->nslots; i++)
    ok = batch_init(&P->slots[i].x, &L->ds->x, cap) == 0 && batch_init(&P->slots[i].y, &L->ds->y, cap) == 0;
  L->pool = P;
  for (int i = 0; ok && i < L->nworkers; i++) {
    ok = pthread_create(&P->threads[i], NULL, worker, L) == 0;
    if (ok) P->nthreads++;
  }
  if (!ok) {
    pool_free(P);
    L->pool = NULL;
  }
  return ok;
}

int fsDL_workers(fsDL_loader *L, int workers, int prefetch, char **err) {
  if (workers < 0 || prefetch < 0)
    return fsIO_fail(err, "DataLoader: %d workers with prefetch %d", workers, prefetch);
  if (!L->ds) return 0;
  pool_free(own_pool(L));
  L->pool = NULL;
  L->nworkers = workers;
  L->prefetch = prefetch > 0 ? prefetch : 1;
  /* the threads start with the first pass (fsDL_start), in the process that iterates */
  return 0;
}

static void order(fsDL_loader *L);

/* ---- order --------------------------------------------------------------------------- */

/* The permutation buffer, grown to m entries when shuffling needs it. */
static int need_perm(fsDL_loader *L, size_t m) {
  if (L->perm_cap >= m && L->perm) return 0;
  size_t *p = realloc(L->perm, (m ? m : 1) * sizeof *p);
  if (!p) return -1;
  L->perm = p;
  L->perm_cap = m;
  return 0;
}

/* Items the sampler chooses from this epoch. */
static size_t base_len(const fsDL_loader *L) { return L->samples ? L->nsamples_base : L->n; }

static void sampler(fsDL_loader *L) {
  size_t n = base_len(L), w = (size_t)L->world;
  L->num_samples = L->bounds ? (L->nbounds ? L->bounds[L->nbounds - 1] : 0)
                 : L->dist_drop_last ? n / w : n / w + (n % w != 0);
}

int fsDL_init_order(fsDL_loader *L, size_t n, int64_t batch_size, bool shuffle, bool drop_last,
                    uint64_t seed, char **err) {
  memset(L, 0, sizeof *L);
  if (batch_size < 1)
    return fsIO_fail(err, "DataLoader: batch_size must be a positive integer, not %lld",
                     (long long)batch_size);
  L->n = n;
  L->batch_size = (size_t)batch_size;
  L->drop_last = drop_last;
  L->shuffle = shuffle;
  L->seed = seed;
  L->world = 1;
  if (shuffle && need_perm(L, n) != 0)
    return fsIO_fail(err, "DataLoader: out of memory for %zu indices", n);
  sampler(L);
  fsDL_start(L, 0);
  return 0;
}

int fsDL_init(fsDL_loader *L, const fsS_dataset *ds, int64_t batch_size, bool shuffle,
              bool drop_last, uint64_t seed, char **err) {
  if (fsDL_init_order(L, ds->len, batch_size, shuffle, drop_last, seed, err) != 0) return -1;
  L->ds = ds;
  /* No batch holds more than the data set: batch_size=10**9 costs nothing. */
  size_t cap = batch_cap(L);
  if (batch_init(&L->own_x, &ds->x, cap) != 0 || batch_init(&L->own_y, &ds->y, cap) != 0) {
    fsDL_free(L);
    return fsIO_fail(err, "DataLoader: out of memory for batches of %lld", (long long)batch_size);
  }
  return 0;
}

int fsDL_distribute(fsDL_loader *L, int rank, int world, bool shuffle, uint64_t seed,
                    bool drop_last, char **err) {
  if (world < 1 || rank < 0 || rank >= world)
    return fsIO_fail(err, "DistributedSampler: invalid rank %d for world size %d", rank, world);
  if (shuffle && need_perm(L, base_len(L)) != 0)
    return fsIO_fail(err, "DistributedSampler: out of memory for %zu indices", base_len(L));
  if (own_pool(L)) pool_quiesce(L->pool);
  L->shuffle = shuffle;
  L->seed = seed;
  L->rank = rank;
  L->world = world;
  L->dist_drop_last = drop_last;
  order(L);
  L->pos = L->batch = 0;
  if (L->pool) pool_go(L);
  return 0;
}

/* Buffers for batches of cap items (fsDL_set_samples: a batch sampler's may be larger). */
static int grow(fsDL_batch *b, const fsS_layout *l, size_t cap) {
  free(b->data);
  b->data = NULL;
  return batch_init(b, l, cap);
}

int fsDL_set_samples(fsDL_loader *L, const size_t *s, size_t m, const size_t *ends, size_t nb,
                     char **err) {
  if (own_pool(L)) pool_quiesce(L->pool);
  if (!s) { /* back to the data set itself */
    free(L->samples);
    L->samples = NULL;
    L->nsamples_base = 0;
    if (L->shuffle && need_perm(L, L->n) != 0)
      return fsIO_fail(err, "DataLoader: out of memory for %zu indices", L->n);
    order(L);
    L->pos = L->batch = 0;
    if (L->pool) pool_go(L);
    return 0;
  }
  size_t *cs = malloc((m ? m : 1) * sizeof *cs), *ce = ends ? malloc((nb ? nb : 1) * sizeof *ce) : NULL;
  if (!cs || (ends && !ce) || (L->shuffle && need_perm(L, m) != 0)) {
    free(cs);
    free(ce);
    return fsIO_fail(err, "DataLoader: out of memory for %zu sampler indices", m);
  }
  memcpy(cs, s, m * sizeof *cs);
  if (ends) memcpy(ce, ends, nb * sizeof *ce);
  size_t old = L->ds ? batch_cap(L) : 0;
  free(L->samples);
  free(L->bounds);
  L->samples = cs;
  L->nsamples_base = m;
  L->bounds = ce;
  L->nbounds = ends ? nb : 0;
  size_t cap = L->ds ? batch_cap(L) : 0;
  bool ok = true;
  if (cap > old) { /* a batch sampler's batches outgrow the buffers */
    ok = grow(&L->own_x, &L->ds->x, cap) == 0 && grow(&L->own_y, &L->ds->y, cap) == 0;
    for (size_t i = 0; ok && L->pool && i < L->pool->nslots; i++)
      ok = grow(&L->pool->slots[i].x, &L->ds->x, cap) == 0 &&
           grow(&L->pool->slots[i].y, &L->ds->y, cap) == 0;
  }
  if (!ok) return fsIO_fail(err, "DataLoader: out of memory for batches of %zu", cap);
  order(L);
  L->pos = L->batch = 0;
  if (L->pool) pool_go(L);
  return 0;
}

int fsDL_rebatch(fsDL_loader *L, int64_t batch_size, bool drop_last, char **err) {
  if (batch_size < 1)
    return fsIO_fail(err, "DataLoader: batch_size must be a positive integer, not %lld", (long long)batch_size);
  if (own_pool(L)) pool_quiesce(L->pool);
  size_t old = L->ds ? batch_cap(L) : 0;
  free(L->bounds);
  L->bounds = NULL;
  L->nbounds = 0;
  L->batch_size = (size_t)batch_size;
  L->drop_last = drop_last;
  size_t cap = L->ds ? batch_cap(L) : 0;
  bool ok = true;
  if (cap > old) {
    ok = grow(&L->own_x, &L->ds->x, cap) == 0 && grow(&L->own_y, &L->ds->y, cap) == 0;
    for (size_t i = 0; ok && L->pool && i < L->pool->nslots; i++)
      ok = grow(&L->pool->slots[i].x, &L->ds->x, cap) == 0 && grow(&L->pool->slots[i].y, &L->ds->y, cap) == 0;
  }
  if (!ok) return fsIO_fail(err, "DataLoader: out of memory for batches of %lld", (long long)batch_size);
  sampler(L);
  L->pos = L->batch = 0;
  if (L->pool) pool_go(L);
  return 0;
}

void fsDL_free(fsDL_loader *L) {
  pool_free(own_pool(L));
  free(L->perm);
  free(L->samples);
  free(L->bounds);
  free(L->own_x.data);
  free(L->own_y.data);
  memset(L, 0, sizeof *L);
}

size_t fsDL_len(const fsDL_loader *L) {
  if (L->bounds) return L->nbounds;
  size_t b = L->batch_size;
  return L->drop_last ? L->num_samples / b : L->num_samples / b + (L->num_samples % b != 0);
}

/* Draws the epoch's permutation of the sampler's list. */
static void order(fsDL_loader *L) {
  sampler(L);
  size_t m = base_len(L);
  if (L->shuffle && L->gen && L->world == 1) {
    /* RandomSampler(generator=g): randperm(n), then randperm(n)[:0]; over a
     * Subset's items too (samples is then the Subset's map: shuffle excludes
     * a script's sampler) */
    fsDL_randperm(L->gen, m, L->perm);
    for (size_t i = 0; i + 1 < m; i++) (void)fsDL_mt_u32(L->gen);
  } else if (L->shuffle) {
    fsDL_mt g; /* DistributedSampler: torch.Generator().manual_seed(seed + epoch) */
    fsDL_mt_seed(&g, L->seed + L->epoch);
    fsDL_randperm(&g, m, L->perm);
  }
}

void fsDL_start(fsDL_loader *L, uint64_t epoch) {
  if (own_pool(L)) pool_quiesce(L->pool);
  else if (L->nworkers > 0 && L->ds) (void)pool_start(L); /* failing that, batches are made on demand */
  L->pos = L->batch = 0;
  L->epoch = epoch;
  if (L->gen) (void)fsDL_mt_u64(L->gen); /* the iterator's _base_seed comes first */
  order(L);
  if (L->pool) pool_go(L);
}

size_t fsDL_index(const fsDL_loader *L, size_t k) {
  size_t m = base_len(L);
  size_t at = L->bounds ? k : ((size_t)L->rank + k * (size_t)L->world) % m;
  size_t j = L->shuffle ? L->perm[at] : at;
  return L->samples ? L->samples[j] : j;
}

uint64_t fsDL_key(const fsDL_loader *L, size_t k) {
  return fsR_bits(fsR_bits(L->seed, L->epoch), (uint64_t)L->rank << 48 ^ k);
}

void fsDL_iter(fsDL_loader *L) { fsDL_start(L, L->passes++); }

bool fsDL_next_range(fsDL_loader *L, size_t *first, size_t *count) {
  if (L->batch >= fsDL_len(L)) return false;
  batch_range(L, L->batch++, first, count);
  L->pos = *first + *count;
  return true;
}

int fsDL_next(fsDL_loader *L, char **err) {
  size_t first, count, k = L->batch;
  if (!fsDL_next_range(L, &first, &count)) return 0;
  if (!own_pool(L)) {
    if (fill(L, &L->own_x, &L->own_y, first, count, err) != 0)
      return *err ? -1 : fsIO_fail(err, "out of memory");
    L->x = L->own_x;
    L->y = L->own_y;
    return 1;
  }
  fsDL_pool *P = L->pool;
  pthread_mutex_lock(&P->mu);
  P->released = k; /* the previous batch's slot is free again */
  pthread_cond_broadcast(&P->cv);
  slot *s = &P->slots[k % P->nslots];
  while (!(s->state == SLOT_READY && s->batch == k)) pthread_cond_wait(&P->cv, &P->mu);
  char *e = s->err;
  s->err = NULL;
  pthread_mutex_unlock(&P->mu);
  if (e) {
    *err = e;
    return -1;
  }
  /* the slot's buffers are the batch until the next call releases them */
  L->x = s->x;
  L->y = s->y;
  return 1;
}
