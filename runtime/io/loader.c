/* loader.c -- epoch order, rank slicing and batch stacking. */
#define _POSIX_C_SOURCE 200809L
#include "loader.h"

#include <stdlib.h>
#include <string.h>

#include "dataio.h"
#include "rng.h"

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

/* The permutation buffer, allocated the first time shuffling is asked for. */
static int need_perm(fsDL_loader *L) {
  return L->perm || (L->perm = malloc(L->ds->len * sizeof *L->perm + 1)) ? 0 : -1;
}

static void sampler(fsDL_loader *L, int rank, int world, bool drop_last) {
  size_t n = L->ds->len, w = (size_t)world;
  L->rank = rank;
  L->world = world;
  L->num_samples = drop_last ? n / w : n / w + (n % w != 0);
}

int fsDL_init(fsDL_loader *L, const fsS_dataset *ds, int64_t batch_size, bool shuffle,
              bool drop_last, uint64_t seed, char **err) {
  memset(L, 0, sizeof *L);
  if (batch_size < 1)
    return fsIO_fail(err, "DataLoader: batch_size must be a positive integer, not %lld",
                     (long long)batch_size);
  L->ds = ds;
  L->batch_size = (size_t)batch_size;
  L->drop_last = drop_last;
  L->shuffle = shuffle;
  L->seed = seed;
  sampler(L, 0, 1, false);
  /* No batch holds more than the data set: batch_size=10**9 costs nothing. */
  size_t cap = L->batch_size < ds->len ? L->batch_size : ds->len;
  if (batch_init(&L->x, &ds->x, cap) != 0 || batch_init(&L->y, &ds->y, cap) != 0 ||
      (shuffle && need_perm(L) != 0)) {
    fsDL_free(L);
    return fsIO_fail(err, "DataLoader: out of memory for batches of %lld", (long long)batch_size);
  }
  fsDL_start(L, 0);
  return 0;
}

int fsDL_distribute(fsDL_loader *L, int rank, int world, bool shuffle, uint64_t seed,
                    bool drop_last, char **err) {
  if (world < 1 || rank < 0 || rank >= world)
    return fsIO_fail(err, "DistributedSampler: invalid rank %d for world size %d", rank, world);
  if (shuffle && need_perm(L) != 0)
    return fsIO_fail(err, "DistributedSampler: out of memory for %zu indices", L->ds->len);
  L->shuffle = shuffle;
  L->seed = seed;
  sampler(L, rank, world, drop_last);
  fsDL_start(L, 0);
  return 0;
}

void fsDL_free(fsDL_loader *L) {
  free(L->perm);
  free(L->x.data);
  free(L->y.data);
  memset(L, 0, sizeof *L);
}

size_t fsDL_len(const fsDL_loader *L) {
  size_t b = L->batch_size;
  return L->drop_last ? L->num_samples / b : L->num_samples / b + (L->num_samples % b != 0);
}

/* Uniform in [0, m) by rejection, so every permutation is equally likely. */
static uint64_t below(uint64_t seed, uint64_t *ctr, uint64_t m) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % m, r;
  do r = fsR_bits(seed, (*ctr)++);
  while (r >= limit);
  return r % m;
}

void fsDL_start(fsDL_loader *L, uint64_t epoch) {
  L->pos = 0;
  if (!L->shuffle) return;
  size_t n = L->ds->len;
  uint64_t ctr = 0, seed = L->seed + epoch;
  for (size_t i = 0; i < n; i++) L->perm[i] = i;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)below(seed, &ctr, i), t = L->perm[i - 1];
    L->perm[i - 1] = L->perm[j];
    L->perm[j] = t;
  }
}

size_t fsDL_index(const fsDL_loader *L, size_t k) {
  size_t at = ((size_t)L->rank + k * (size_t)L->world) % L->ds->len;
  return L->shuffle ? L->perm[at] : at;
}

void fsDL_iter(fsDL_loader *L) { fsDL_start(L, L->passes++); }

bool fsDL_next(fsDL_loader *L) {
  size_t left = L->num_samples - L->pos;
  size_t count = left < L->batch_size ? left : L->batch_size;
  if (count == 0 || (L->drop_last && count < L->batch_size)) return false;
  size_t xb = L->ds->x.bytes, yb = L->ds->y.bytes;
  for (size_t k = 0; k < count; k++)
    fsS_get(L->ds, fsDL_index(L, L->pos + k), (char *)L->x.data + k * xb,
            (char *)L->y.data + k * yb);
  L->pos += count;
  L->x.shape[0] = L->y.shape[0] = (int64_t)count;
  return true;
}
