/* loader.h -- DataLoader: the epoch's order (samplers as torch has them),
 * batching, and worker threads that stack a native data set's batches ahead.
 *
 * One epoch visits num_samples positions. Position p maps to a data set
 * index through, in turn: the epoch's permutation (identity, or torch's
 * randperm), the DistributedSampler slice of rank r (position r + p·world
 * of the list padded by repeating it from its start), and the sample list a
 * script's sampler gave (identity without one). Batches are consecutive runs
 * of batch_size positions (the last one short unless drop_last), or the
 * runs a batch sampler gave.
 *
 * Permutations are torch's: mt19937 as torch.Generator seeds it, randperm
 * as torch's CPU randperm draws it (z = random() % (n - i), swap i and
 * i + z). With a generator (DataLoader(generator=g)) an epoch draws as
 * DataLoader + RandomSampler do: one 64-bit base seed, randperm(n), and the
 * randperm(n)[:0] RandomSampler's last line draws; the orders equal torch's
 * for the same seed. Without one, epoch e's order is randperm from a
 * generator seeded seed + e, which is exactly DistributedSampler's.
 *
 * Workers (num_workers > 0, native data sets only): threads fill up to
 * workers * prefetch batch slots ahead of the consumer; batch k is always
 * built from the same indices and the same random key as without workers,
 * so the batches and their order do not depend on the worker count. */
#ifndef FS_LOADER_H
#define FS_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dataset.h"

/* torch.Generator's CPU engine: mt19937 with torch's seeding. */
typedef struct fsDL_mt {
  uint32_t state[624];
  int next;
  uint64_t seed;
} fsDL_mt;

void fsDL_mt_seed(fsDL_mt *g, uint64_t seed);
uint32_t fsDL_mt_u32(fsDL_mt *g); /* generator->random() */
uint64_t fsDL_mt_u64(fsDL_mt *g); /* generator->random64() */
/* torch.randperm(n, generator=g) into out[0..n). */
void fsDL_randperm(fsDL_mt *g, size_t n, size_t *out);
/* torch.randint(high, (n,), generator=g) into out[0..n). */
void fsDL_randint(fsDL_mt *g, uint64_t high, size_t n, size_t *out);

/* A batch: the items stacked along a new first dimension. */
typedef struct fsDL_batch {
  fs_dtype dtype;
  int ndim;
  int64_t shape[FS_MAX_RANK]; /* shape[0] = items in this batch */
  void *data;                 /* owned by the loader; valid until the next call */
} fsDL_batch;

struct fsDL_pool;

typedef struct fsDL_loader {
  const fsS_dataset *ds; /* borrowed, or NULL: the evaluator fetches items */
  size_t n;              /* data set length */
  size_t batch_size;
  bool shuffle, drop_last;
  uint64_t seed;
  fsDL_mt *gen;          /* borrowed torch.Generator, or NULL */
  int rank, world;       /* DistributedSampler; 0 of 1 without one */
  bool dist_drop_last;
  size_t *samples, nsamples_base; /* a script sampler's list this epoch, or NULL */
  size_t *bounds, nbounds;        /* a batch sampler's batch ends, or NULL */
  size_t num_samples;    /* positions per epoch on this rank */
  size_t *perm;          /* the epoch's permutation once shuffling was asked for */
  size_t perm_cap;
  size_t pos;            /* next position of the epoch */
  size_t batch;          /* next batch of the epoch */
  uint64_t passes;       /* fsDL_iter calls so far */
  uint64_t epoch;
  fsDL_batch x, y;       /* the last batch fsDL_next made (a view) */
  fsDL_batch own_x, own_y; /* the buffers batches are made in without workers */
  int nworkers, prefetch; /* fsDL_workers: the threads to start with a pass */
  struct fsDL_pool *pool; /* worker threads, or NULL */
} fsDL_loader;

/* Order only (items fetched by the caller): n items. */
int fsDL_init_order(fsDL_loader *L, size_t n, int64_t batch_size, bool shuffle, bool drop_last,
                    uint64_t seed, char **err);
/* Order and batches of a native data set. */
int fsDL_init(fsDL_loader *L, const fsS_dataset *ds, int64_t batch_size, bool shuffle,
              bool drop_last, uint64_t seed, char **err);
/* `workers` threads keeping workers * prefetch batches ready (native data
 * sets only; 0 workers: batches are made on demand), started by the next
 * fsDL_start in the process that iterates (a forked child makes its own). */
int fsDL_workers(fsDL_loader *L, int workers, int prefetch, char **err);
/* Switches to DistributedSampler mode (what setup_dataloaders does); the
 * loader's batch_size and drop_last still batch this rank's part. */
int fsDL_distribute(fsDL_loader *L, int rank, int world, bool shuffle, uint64_t seed,
                    bool drop_last, char **err);
/* This epoch's sample list from a script sampler (copied; m entries, each
 * < n) and, with a batch sampler, its batch ends (cumulative, nb of them).
 * s NULL: no list (the data set's own indices) again. */
int fsDL_set_samples(fsDL_loader *L, const size_t *s, size_t m, const size_t *ends, size_t nb,
                     char **err);
/* Batches of batch_size positions again (a batch sampler's batches dropped),
 * the buffers grown to fit. */
int fsDL_rebatch(fsDL_loader *L, int64_t batch_size, bool drop_last, char **err);
void fsDL_free(fsDL_loader *L);

/* Batches per epoch: len(dataloader). */
size_t fsDL_len(const fsDL_loader *L);
/* Starts an epoch: draws its order and rewinds (waits for workers to stop). */
void fsDL_start(fsDL_loader *L, uint64_t epoch);
/* Starts the next pass over the loader (`for batch in loader`): pass k is
 * epoch k, as a PyTorch DataLoader reshuffles on every iteration and
 * Fabric's wrapper calls sampler.set_epoch with its iteration count. */
void fsDL_iter(fsDL_loader *L);
/* The data set index of position k < num_samples of the current epoch. */
size_t fsDL_index(const fsDL_loader *L, size_t k);
/* The positions [*first, *first + *count) of the next batch; false at the
 * epoch's end. Advances the epoch (callers that fetch items themselves). */
bool fsDL_next_range(fsDL_loader *L, size_t *first, size_t *count);
/* The random key of position k this epoch (random transforms draw from it). */
uint64_t fsDL_key(const fsDL_loader *L, size_t k);
/* Fills L->x and L->y with the next batch: 1, 0 when the epoch is done,
 * -1 + *err when an item cannot be read (the message names the file). */
int fsDL_next(fsDL_loader *L, char **err);

#endif
